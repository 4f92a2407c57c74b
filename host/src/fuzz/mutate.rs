//! Inputs made from inputs: byte edits, the target's own tokens spliced in, and ranges repeated
//! (so nesting, lists and aliases grow toward the size bounds, where cost bugs live).

use fastrand::Rng;

/// Bytes that change how a parser of text reads what follows.
const INTERESTING: &[u8] = b"\0\xff\"\\{}[]:,\n\r\t &*-!#|>'%$.0";

/// A child of `parent`: one to six edits, at most `max_len` bytes.
pub fn mutate(rng: &mut Rng, parent: &[u8], donor: &[u8], dictionary: &[&str], max_len: usize) -> Vec<u8> {
    let mut out = parent.to_vec();
    for _ in 0..rng.usize(1..=6) {
        edit(rng, &mut out, donor, dictionary, max_len);
    }
    out.truncate(max_len);
    out
}

fn edit(rng: &mut Rng, out: &mut Vec<u8>, donor: &[u8], dictionary: &[&str], max_len: usize) {
    let at = |rng: &mut Rng, out: &Vec<u8>| rng.usize(0..=out.len());
    match rng.u8(0..9) {
        0 if !out.is_empty() => {
            let i = rng.usize(0..out.len());
            out[i] ^= 1 << rng.u8(0..8);
        }
        1 if !out.is_empty() => {
            let i = rng.usize(0..out.len());
            out[i] = INTERESTING[rng.usize(0..INTERESTING.len())];
        }
        2 | 3 if !dictionary.is_empty() => {
            let token = dictionary[rng.usize(0..dictionary.len())].as_bytes();
            let i = at(rng, out);
            out.splice(i..i, token.iter().copied());
        }
        4 if !out.is_empty() => {
            let (start, end) = range(rng, out.len());
            out.drain(start..end);
        }
        5 if !out.is_empty() => {
            // A range repeated: a list grows, a nesting deepens, an alias is used again.
            let (start, end) = range(rng, out.len());
            let piece = out[start..end].to_vec();
            let copies = if rng.u8(0..8) == 0 { rng.usize(1..=4096) } else { rng.usize(1..=16) };
            let room = max_len.saturating_sub(out.len()) / piece.len().max(1);
            let repeated = piece.repeat(copies.min(room));
            out.splice(end..end, repeated);
        }
        6 if !donor.is_empty() => {
            let (start, end) = range(rng, donor.len());
            let i = at(rng, out);
            out.splice(i..i, donor[start..end].iter().copied());
        }
        7 if !out.is_empty() && !dictionary.is_empty() => {
            let (start, end) = range(rng, out.len());
            let token = dictionary[rng.usize(0..dictionary.len())].as_bytes();
            out.splice(start..end, token.iter().copied());
        }
        _ => {
            let i = at(rng, out);
            out.insert(i, rng.u8(..));
        }
    }
}

/// A range of a buffer of `len` bytes (`len` > 0), mostly short.
fn range(rng: &mut Rng, len: usize) -> (usize, usize) {
    let start = rng.usize(0..len);
    let longest = if rng.bool() { 16 } else { len };
    let end = (start + rng.usize(1..=longest)).min(len);
    (start, end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn children_stay_within_the_size_and_differ_from_their_parent() {
        let mut rng = Rng::with_seed(7);
        let parent = br#"{"a": [1, 2, {"b": "c"}]}"#;
        let mut changed = 0;
        for _ in 0..2000 {
            let child = mutate(&mut rng, parent, b"- x: &a y", &["[", "*a"], 4096);
            assert!(child.len() <= 4096);
            changed += usize::from(child != parent);
        }
        assert!(changed > 1900, "only {changed} of 2000 children changed");
    }
}
