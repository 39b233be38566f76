//! Plain-text tables in management replies, laid out as varnishd lays
//! out its own (`vcl.deps`): each column as wide as its widest cell among
//! the rows that go on past it, then a gap of one to four spaces, as
//! much as an 80-column line leaves.

/// The widest a line may be before the gap narrows.
const LINE: usize = 80;
const MIN_GAP: usize = 1;
const MAX_GAP: usize = 4;

/// Lays out rows of cells, one line each.
pub(crate) fn table(rows: &[Vec<&str>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let mut widths = vec![0; columns];
    for row in rows {
        // The last cell of a row is never padded.
        for (i, cell) in row.iter().enumerate().take(row.len().saturating_sub(1)) {
            widths[i] = widths[i].max(cell.len());
        }
    }
    let longest = rows
        .iter()
        .map(|r| r.iter().map(|c| c.len()).sum::<usize>())
        .max()
        .unwrap_or(0);
    let gaps = columns.saturating_sub(1).max(1);
    let gap = (LINE.saturating_sub(longest) / gaps).clamp(MIN_GAP, MAX_GAP);
    let mut out = String::new();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            out.push_str(cell);
            if i + 1 < row.len() {
                out.push_str(&" ".repeat(widths[i] + gap - cell.len()));
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up_as_varnishd_lines_them_up() {
        let rows = vec![
            vec!["boot"],
            vec!["v2"],
            vec!["lbl", "v2"],
            vec!["top", "lbl"],
        ];
        assert_eq!(table(&rows), "boot\nv2\nlbl    v2\ntop    lbl\n");
        let wide = "x".repeat(79);
        assert_eq!(table(&[vec![&wide, "y"]]), format!("{wide} y\n"));
        assert_eq!(table(&[]), "");
    }
}
