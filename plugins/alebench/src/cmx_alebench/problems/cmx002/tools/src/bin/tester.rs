//! tester INPUT OUTPUT: prints "Score = N" on stderr; a wrong answer exits 1 with its reason.
fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 3 {
        eprintln!("usage: tester INPUT OUTPUT");
        std::process::exit(2);
    }
    let input = tools::parse_input(&std::fs::read_to_string(&args[1]).expect("cannot read INPUT"))
        .unwrap_or_else(|e| panic!("bad input: {}", e));
    let output = std::fs::read_to_string(&args[2]).unwrap_or_default();
    match tools::parse_output(&input, &output) {
        Ok(order) => eprintln!("Score = {}", tools::compute_score(&input, &order)),
        Err(why) => {
            eprintln!("wrong answer: {}", why);
            eprintln!("Score = 0");
            std::process::exit(1);
        }
    }
}
