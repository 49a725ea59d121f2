//! Plain-text tables for the store commands: columns padded to their widest cell,
//! numbers right-aligned, the last column left ragged.

/// How a column is aligned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Align {
    Left,
    Right,
}

/// Renders `rows` under `headers`, two spaces between columns, each line indented by
/// `indent` spaces. `align` has a letter per column: `L` left, `R` right (a column without
/// one is left).
pub fn render(headers: &[&str], align: &str, rows: &[Vec<String>], indent: usize) -> String {
    let align: Vec<Align> = align
        .chars()
        .map(|c| if c == 'R' { Align::Right } else { Align::Left })
        .collect();
    let columns = headers.len();
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate().take(columns) {
            widths[i] = widths[i].max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| -> String {
        let mut out = " ".repeat(indent);
        for (i, cell) in cells.iter().enumerate() {
            let pad = widths[i].saturating_sub(cell.chars().count());
            let last = i + 1 == columns;
            match align.get(i).copied().unwrap_or(Align::Left) {
                Align::Right => {
                    out.push_str(&" ".repeat(pad));
                    out.push_str(cell);
                }
                Align::Left => {
                    out.push_str(cell);
                    if !last {
                        out.push_str(&" ".repeat(pad));
                    }
                }
            }
            if !last {
                out.push_str("  ");
            }
        }
        out.push('\n');
        out
    };
    let mut out = line(headers.to_vec());
    for row in rows {
        out.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    out
}

/// `12.34` style percentages for tables.
pub fn pct(value: f64) -> String {
    format!("{value:.2}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pads_columns_and_right_aligns_numbers() {
        let t = render(
            &["SAMPLES", "FUNCTION"],
            "RL",
            &[
                vec!["1,234".into(), "hash_chain".into()],
                vec!["5".into(), "x".into()],
            ],
            2,
        );
        assert_eq!(
            t,
            "  SAMPLES  FUNCTION\n    1,234  hash_chain\n        5  x\n"
        );
    }
}
