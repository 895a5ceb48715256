//! gen SEEDS_FILE [--N=n]: one input per seed line, written to in/0000.txt, in/0001.txt, ...
use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 2 {
        eprintln!("usage: gen SEEDS_FILE [--N=n]");
        std::process::exit(2);
    }
    let mut n = None;
    for arg in &args[2..] {
        match arg.strip_prefix("--N=") {
            Some(value) => n = Some(value.parse::<usize>().expect("--N= takes a number")),
            None => {
                eprintln!("unknown parameter {}", arg);
                std::process::exit(2);
            }
        }
    }
    let seeds = std::fs::read_to_string(&args[1]).expect("cannot read the seeds file");
    std::fs::create_dir_all("in").expect("cannot create in/");
    for (i, line) in seeds.lines().map(str::trim).filter(|l| !l.is_empty()).enumerate() {
        let seed: u64 = line.parse().expect("a seed line is not an integer");
        let input = tools::gen(seed, n);
        let mut file = std::fs::File::create(format!("in/{:04}.txt", i)).expect("cannot write in/NNNN.txt");
        write!(file, "{}", input).unwrap();
    }
}
