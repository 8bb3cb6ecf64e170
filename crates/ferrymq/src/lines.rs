//! Reading standard input a line at a time with a bound, for the commands that take one item
//! per line (`runmqsc` commands, `put`, `pub` and `req` messages): a line longer than what it
//! could ever become is never held whole, so one endless line cannot take the command's memory.

use std::io::BufRead;

/// What [`read_line`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// The input has ended (nothing was read).
    End,
    /// A line is in the buffer, without its `\n` or `\r\n`.
    Read,
    /// The line was longer than the bound: `len` bytes without its end, the last of them that
    /// is not white space `last` (0 if none). The buffer holds nothing of it, and the input
    /// stands at the start of the next line.
    TooLong { len: u64, last: u8 },
}

/// Reads the next line of `input` into `buf` (cleared first), holding at most `max` bytes of
/// it. A longer line is read to its end and dropped.
pub(crate) fn read_line(
    input: &mut impl BufRead,
    buf: &mut Vec<u8>,
    max: usize,
) -> std::io::Result<Line> {
    buf.clear();
    // Up to max + 2 bytes: the line's bytes, then \r\n, are enough to see whether it fits.
    let limit = max.saturating_add(2) as u64;
    let n = std::io::Read::take(&mut *input, limit).read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(Line::End);
    }
    let ended = buf.last() == Some(&b'\n');
    if ended {
        buf.pop();
        if buf.last() == Some(&b'\r') {
            buf.pop();
        }
    }
    if buf.len() <= max && (ended || (n as u64) < limit) {
        return Ok(Line::Read);
    }
    // Too long: count and drop the rest of the line without keeping it.
    let mut len = buf.len() as u64;
    let mut last_cr = buf.last() == Some(&b'\r');
    let mut last = last_visible(buf, 0);
    buf.clear();
    if !ended {
        loop {
            let chunk = input.fill_buf()?;
            if chunk.is_empty() {
                break;
            }
            match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => {
                    if i > 0 {
                        last_cr = chunk[i - 1] == b'\r';
                        last = last_visible(&chunk[..i], last);
                    }
                    len += i as u64;
                    input.consume(i + 1);
                    // A \r just before the \n is the line's end, not its bytes.
                    len -= u64::from(last_cr);
                    break;
                }
                None => {
                    let k = chunk.len();
                    last_cr = chunk[k - 1] == b'\r';
                    last = last_visible(chunk, last);
                    len += k as u64;
                    input.consume(k);
                }
            }
        }
    }
    Ok(Line::TooLong { len, last })
}

/// Calls `each` with every line of standard input as a message body (`pub`, `req`), each held
/// only up to `max` bytes. A longer line stops the input there: the error names the line and
/// the limit, and says that it and the lines after it were not `verb`.
pub(crate) fn each_stdin_message(
    max: usize,
    verb: &str,
    mut each: impl FnMut(Vec<u8>) -> crate::lifecycle::Res,
) -> crate::lifecycle::Res {
    let mut input = std::io::stdin().lock();
    let mut line = Vec::new();
    let mut n: u64 = 0;
    loop {
        match read_line(&mut input, &mut line, max) {
            Ok(Line::End) => return Ok(()),
            Ok(Line::Read) => {}
            Ok(Line::TooLong { len, .. }) => {
                return Err(crate::samples::other(format!(
                    "line {} of the standard input is {len} bytes; this connection takes \
                     messages of at most {max} bytes; it and the lines after it were not \
                     {verb} (the {n} before it were)",
                    n + 1
                )))
            }
            Err(e) => return Err(crate::samples::other(format!("standard input: {e}"))),
        }
        each(std::mem::take(&mut line))?;
        n += 1;
    }
}

/// The last byte of `bytes` that is not white space, or `before` if there is none.
pub(crate) fn last_visible(bytes: &[u8], before: u8) -> u8 {
    bytes
        .iter()
        .rev()
        .find(|b| !b.is_ascii_whitespace())
        .copied()
        .unwrap_or(before)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(text: &[u8], max: usize) -> Vec<(Line, Vec<u8>)> {
        let mut r = std::io::BufReader::with_capacity(4, text);
        let mut buf = Vec::new();
        let mut out = Vec::new();
        loop {
            let l = read_line(&mut r, &mut buf, max).unwrap();
            if l == Line::End {
                return out;
            }
            out.push((l, buf.clone()));
        }
    }

    #[test]
    fn lines_up_to_the_bound_are_read_and_longer_ones_dropped_whole() {
        let got = all(b"abc\r\nabcdef\nabcdefg\n\nxy", 6);
        assert_eq!(
            got,
            vec![
                (Line::Read, b"abc".to_vec()),
                (Line::Read, b"abcdef".to_vec()),
                (Line::TooLong { len: 7, last: b'g' }, vec![]),
                (Line::Read, vec![]),
                (Line::Read, b"xy".to_vec()),
            ]
        );
    }

    #[test]
    fn a_last_line_without_its_end_is_judged_the_same() {
        assert_eq!(all(b"abcdef", 6), vec![(Line::Read, b"abcdef".to_vec())]);
        assert_eq!(
            all(b"abcdefgh", 6),
            vec![(Line::TooLong { len: 8, last: b'h' }, vec![])]
        );
        // \r\n counts as the end, not as the line's bytes.
        assert_eq!(
            all(b"abcdef\r\n", 6),
            vec![(Line::Read, b"abcdef".to_vec())]
        );
        assert_eq!(
            all(b"abcdefg\r\nz\n", 6),
            vec![
                (Line::TooLong { len: 7, last: b'g' }, vec![]),
                (Line::Read, b"z".to_vec())
            ]
        );
    }

    #[test]
    fn a_dropped_line_tells_its_last_visible_byte() {
        let got = all(b"DEFINE QLOCAL(ABCDEFGH) +  \r\nDESCR('x')\n", 12);
        assert_eq!(
            got[0].0,
            Line::TooLong {
                len: 27,
                last: b'+'
            }
        );
        assert_eq!(got[1], (Line::Read, b"DESCR('x')".to_vec()));
    }

    #[test]
    fn an_endless_line_is_counted_without_being_held() {
        let long = vec![b'x'; 1 << 20];
        let mut text = long.clone();
        text.extend_from_slice(b"\nnext\n");
        let mut r = std::io::BufReader::with_capacity(8192, &text[..]);
        let mut buf = Vec::new();
        assert_eq!(
            read_line(&mut r, &mut buf, 100).unwrap(),
            Line::TooLong {
                len: 1 << 20,
                last: b'x'
            }
        );
        assert!(buf.capacity() < 4096, "held {} bytes", buf.capacity());
        assert_eq!(read_line(&mut r, &mut buf, 100).unwrap(), Line::Read);
        assert_eq!(buf, b"next");
    }
}
