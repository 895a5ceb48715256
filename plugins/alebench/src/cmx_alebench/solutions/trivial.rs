// cmx001 reference: every depot at the grid's centre (deterministic), in Rust.
use std::io::{self, BufRead, Write};

fn main() {
    let mut line = String::new();
    io::stdin().lock().read_line(&mut line).unwrap();
    let k: usize = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    let mut out = io::stdout().lock();
    for _ in 0..k {
        writeln!(out, "5000 5000").unwrap();
    }
}
