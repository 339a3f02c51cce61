//! A small line diff for cassette mismatch messages: longest common
//! subsequence on the lines between the common prefix and suffix, printed
//! with a few lines of context, `-` for the recorded side and `+` for the
//! side sent now.

/// Above this many LCS cells (lines × lines, after trimming the common ends)
/// the middle is shown as all removed then all added.
const MAX_CELLS: usize = 4_000_000;
/// Most lines printed; the rest are counted.
const MAX_LINES: usize = 80;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Op {
    Same,
    Removed,
    Added,
}

/// The edit script turning `old` into `new`, as `(op, line)` pairs.
fn script<'a>(old: &[&'a str], new: &[&'a str]) -> Vec<(Op, &'a str)> {
    let prefix = old.iter().zip(new).take_while(|(x, y)| x == y).count();
    let suffix = old[prefix..]
        .iter()
        .rev()
        .zip(new[prefix..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let gone = &old[prefix..old.len() - suffix];
    let came = &new[prefix..new.len() - suffix];

    let mut out: Vec<(Op, &str)> = old[..prefix].iter().map(|l| (Op::Same, *l)).collect();
    if gone.len().saturating_mul(came.len()) > MAX_CELLS {
        out.extend(gone.iter().map(|l| (Op::Removed, *l)));
        out.extend(came.iter().map(|l| (Op::Added, *l)));
    } else {
        // lcs[g * width + c]: LCS length of gone[g..] and came[c..].
        let width = came.len() + 1;
        let mut lcs = vec![0u32; (gone.len() + 1) * width];
        for g in (0..gone.len()).rev() {
            for c in (0..came.len()).rev() {
                lcs[g * width + c] = if gone[g] == came[c] {
                    lcs[(g + 1) * width + c + 1] + 1
                } else {
                    lcs[(g + 1) * width + c].max(lcs[g * width + c + 1])
                };
            }
        }
        let (mut g, mut c) = (0, 0);
        while g < gone.len() && c < came.len() {
            if gone[g] == came[c] {
                out.push((Op::Same, gone[g]));
                g += 1;
                c += 1;
            } else if lcs[(g + 1) * width + c] >= lcs[g * width + c + 1] {
                out.push((Op::Removed, gone[g]));
                g += 1;
            } else {
                out.push((Op::Added, came[c]));
                c += 1;
            }
        }
        out.extend(gone[g..].iter().map(|l| (Op::Removed, *l)));
        out.extend(came[c..].iter().map(|l| (Op::Added, *l)));
    }
    out.extend(old[old.len() - suffix..].iter().map(|l| (Op::Same, *l)));
    out
}

/// The lines that differ between `old` and `new`, each changed line with
/// `context` unchanged lines around it; skipped stretches show as `  …`.
/// Empty when the texts have the same lines.
pub(super) fn line_diff(old: &str, new: &str, context: usize) -> String {
    let old: Vec<&str> = old.lines().collect();
    let new: Vec<&str> = new.lines().collect();
    let ops = script(&old, &new);
    let changed: Vec<usize> = (0..ops.len()).filter(|&i| ops[i].0 != Op::Same).collect();
    if changed.is_empty() {
        return String::new();
    }
    let near = |i: usize| {
        // Index of the first change at or after `i`; a line is shown when a
        // change lies within `context` of it on either side.
        let k = changed.partition_point(|&c| c < i);
        changed.get(k).is_some_and(|&c| c - i <= context)
            || (k > 0 && i - changed[k - 1] <= context)
    };
    let mut lines = Vec::new();
    let mut skipped = false;
    for (i, (op, line)) in ops.iter().enumerate() {
        if !near(i) {
            if !skipped {
                lines.push("  …".to_string());
                skipped = true;
            }
            continue;
        }
        skipped = false;
        let mark = match op {
            Op::Same => ' ',
            Op::Removed => '-',
            Op::Added => '+',
        };
        lines.push(format!("{mark} {line}"));
    }
    if lines.len() > MAX_LINES {
        let more = lines.len() - MAX_LINES;
        lines.truncate(MAX_LINES);
        lines.push(format!("  … ({more} more line(s))"));
    }
    lines.join("\n")
}

/// How many lines `a` and `b` share, counted as multisets (a cheap
/// similarity score for picking the closest recorded request).
pub(super) fn common_lines(left: &str, right: &str) -> usize {
    let mut left: Vec<&str> = left.lines().collect();
    let mut right: Vec<&str> = right.lines().collect();
    left.sort_unstable();
    right.sort_unstable();
    let (mut l, mut r, mut shared) = (0, 0, 0);
    while l < left.len() && r < right.len() {
        match left[l].cmp(right[r]) {
            std::cmp::Ordering::Less => l += 1,
            std::cmp::Ordering::Greater => r += 1,
            std::cmp::Ordering::Equal => {
                shared += 1;
                l += 1;
                r += 1;
            }
        }
    }
    shared
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_text_has_no_diff() {
        assert_eq!(line_diff("a\nb", "a\nb", 2), "");
    }

    #[test]
    fn changed_line_with_context() {
        let old = "1\n2\n3\n4\n5\n6\n7\n8";
        let new = "1\n2\n3\n4\nfive\n6\n7\n8";
        assert_eq!(line_diff(old, new, 1), "  …\n  4\n- 5\n+ five\n  6\n  …");
    }

    #[test]
    fn insertions_and_deletions() {
        assert_eq!(line_diff("a\nc", "a\nb\nc", 0), "  …\n+ b\n  …");
        assert_eq!(line_diff("a\nb\nc", "a\nc", 5), "  a\n- b\n  c");
        assert_eq!(line_diff("", "x", 2), "+ x");
        assert_eq!(line_diff("x\ny", "", 2), "- x\n- y");
    }

    #[test]
    fn lcs_keeps_the_common_middle() {
        let d = line_diff("a\nX\nb\nc\nY\nd", "a\nb\nZ\nc\nd", 0);
        assert_eq!(d, "  …\n- X\n  …\n+ Z\n  …\n- Y\n  …");
    }

    #[test]
    fn long_diffs_are_capped() {
        let old = (0..200)
            .map(|i| i.to_string())
            .collect::<Vec<_>>()
            .join("\n");
        let d = line_diff(&old, "", 0);
        assert!(d.ends_with("(120 more line(s))"), "{d}");
    }

    #[test]
    fn common_lines_counts_multisets() {
        assert_eq!(common_lines("a\na\nb", "a\nb\nb\nc"), 2);
        assert_eq!(common_lines("", "a"), 0);
    }
}
