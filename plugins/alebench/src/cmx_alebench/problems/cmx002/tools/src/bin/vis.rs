//! vis INPUT OUTPUT: writes vis.svg (the lanterns and the tour) and prints "Score = N".
use itertools::Itertools;
use std::fmt::Write;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let input = tools::parse_input(&std::fs::read_to_string(&args[1]).expect("cannot read INPUT")).unwrap();
    let output = std::fs::read_to_string(&args[2]).unwrap_or_default();
    let mut svg = String::new();
    writeln!(svg, "<svg xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 1000 1000\">").unwrap();
    let score = match tools::parse_output(&input, &output) {
        Ok(order) => {
            let path = order.iter().chain(order.first()).map(|&i| input.points[i]).map(|(x, y)| format!("{},{}", x, y)).join(" ");
            writeln!(svg, "<polyline points=\"{}\" fill=\"none\" stroke=\"gray\"/>", path).unwrap();
            tools::compute_score(&input, &order)
        }
        Err(_) => 0,
    };
    for (x, y) in &input.points {
        writeln!(svg, "<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"orange\"/>", x, y).unwrap();
    }
    svg.push_str("</svg>\n");
    std::fs::write("vis.svg", svg).expect("cannot write vis.svg");
    eprintln!("Score = {}", score);
}
