//! cmx002 "Lantern tour": N lanterns at integer points of [0, 999]^2; visit them all in a
//! closed tour. With L the tour's Euclidean length, Score = round(10^6 * 100 N / (100 N + L)).

use itertools::Itertools;
use rand::prelude::*;
use rand_chacha::ChaCha20Rng;

pub const SIDE: i64 = 1000;

#[derive(Clone, Debug)]
pub struct Input {
    pub points: Vec<(i64, i64)>,
}

impl std::fmt::Display for Input {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        writeln!(f, "{}", self.points.len())?;
        for (x, y) in &self.points {
            writeln!(f, "{} {}", x, y)?;
        }
        Ok(())
    }
}

/// The input of `seed`; `n` overrides the number of lanterns (50..=200 otherwise).
pub fn gen(seed: u64, n: Option<usize>) -> Input {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let n = n.unwrap_or_else(|| rng.gen_range(50..=200));
    let points = (0..n).map(|_| (rng.gen_range(0..SIDE), rng.gen_range(0..SIDE))).collect();
    Input { points }
}

pub fn parse_input(text: &str) -> Result<Input, String> {
    let mut tokens = text.split_whitespace().map(|t| t.parse::<i64>());
    let mut next = || tokens.next().ok_or_else(|| "unexpected end of input".to_string())?.map_err(|e| e.to_string());
    let n = next()? as usize;
    let mut points = Vec::with_capacity(n);
    for _ in 0..n {
        points.push((next()?, next()?));
    }
    Ok(Input { points })
}

/// The visiting order, or why the output is a wrong answer.
pub fn parse_output(input: &Input, text: &str) -> Result<Vec<usize>, String> {
    let n = input.points.len();
    let order: Vec<usize> = text
        .split_whitespace()
        .enumerate()
        .map(|(i, t)| t.parse::<usize>().map_err(|_| format!("token {} is not an index: {:?}", i + 1, t)))
        .collect::<Result<_, _>>()?;
    if order.len() != n {
        return Err(format!("expected {} indices, got {}", n, order.len()));
    }
    let mut seen = vec![false; n];
    for &i in &order {
        if i >= n {
            return Err(format!("index {} is out of range 0..{}", i, n));
        }
        if seen[i] {
            return Err(format!("index {} is visited twice", i));
        }
        seen[i] = true;
    }
    Ok(order)
}

pub fn tour_length(input: &Input, order: &[usize]) -> f64 {
    order
        .iter()
        .chain(order.first())
        .tuple_windows()
        .map(|(&a, &b)| {
            let (ax, ay) = input.points[a];
            let (bx, by) = input.points[b];
            (((ax - bx).pow(2) + (ay - by).pow(2)) as f64).sqrt()
        })
        .sum()
}

pub fn compute_score(input: &Input, order: &[usize]) -> i64 {
    let n = input.points.len() as f64;
    (1e6 * 100.0 * n / (100.0 * n + tour_length(input, order))).round() as i64
}
