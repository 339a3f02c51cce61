//! One record as one line of the file store: `<len> <crc32> <json>\n`,
//! with the length and the CRC-32 (IEEE) of the JSON in eight hex digits
//! each. A line whose length, checksum or end does not match is damaged.
//! Only the bytes after a file's last newline may be a torn record (a
//! crash mid-write), and only when they begin like a frame (see
//! `FileStore`).

/// The CRC-32 of `bytes` (IEEE 802.3, reflected, as zlib and PNG): a
/// byte-wise table built at compile time, no dependency.
pub(crate) fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in bytes {
        crc = TABLE[((crc ^ u32::from(b)) & 0xff) as usize] ^ (crc >> 8);
    }
    !crc
}

const TABLE: [u32; 256] = {
    let mut table = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 == 1 {
                0xEDB8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// `json` framed as one line, newline included. `json` holds no newline
/// (serde_json escapes them in strings).
pub(crate) fn frame(json: &str) -> String {
    format!("{:08x} {:08x} {json}\n", json.len(), crc32(json.as_bytes()))
}

/// The JSON of one framed line (without its newline), or `None` when the
/// frame does not hold.
pub(crate) fn unframe(line: &str) -> Option<&str> {
    let (len, rest) = line.split_once(' ')?;
    let (crc, json) = rest.split_once(' ')?;
    // Hex digits only (`from_str_radix` would take a sign too): the length
    // in eight digits or more (a record past 4 GiB), the CRC in eight.
    if !is_hex(len.as_bytes(), 8..=16) || !is_hex(crc.as_bytes(), 8..=8) {
        return None;
    }
    let len = usize::from_str_radix(len, 16).ok()?;
    let crc = u32::from_str_radix(crc, 16).ok()?;
    (json.len() == len && crc32(json.as_bytes()) == crc).then_some(json)
}

/// Whether `tail` (the bytes after a file's last newline, not empty) is
/// the beginning of a framed line that a crash cut short: hex digits of
/// its length, then of its CRC, each field whole before the next begins,
/// then at most as many bytes of JSON as the length says. Zeros, text,
/// random bytes are not.
pub(crate) fn is_torn(tail: &[u8]) -> bool {
    let mut fields = tail.splitn(3, |&b| b == b' ');
    let len = fields.next().unwrap_or_default();
    let Some(crc) = fields.next() else {
        // Cut inside the length.
        return is_hex(len, 1..=16) && writable_length(len);
    };
    if !is_hex(len, 8..=16) || !writable_length(len) {
        return false;
    }
    let Some(json) = fields.next() else {
        // Cut inside the CRC.
        return crc.is_empty() || is_hex(crc, 1..=8);
    };
    let Ok(len) = usize::from_str_radix(std::str::from_utf8(len).unwrap_or("-"), 16) else {
        return false;
    };
    is_hex(crc, 8..=8) && json.len() <= len
}

/// Whether the hex digits `len` (the whole length field, or the start a
/// crash left of it) can be what [`frame`] wrote: eight digits, or more
/// without a leading zero (a record past 4 GiB), and never past
/// `isize::MAX` (no string is longer). A huge length after the last
/// newline (`ffffffffffffffff`) is damage, not a torn record to cut off.
fn writable_length(len: &[u8]) -> bool {
    len.len() <= 8 || (len[0] != b'0' && (len.len() < 16 || len[0] <= b'7'))
}

fn is_hex(field: &[u8], digits: std::ops::RangeInclusive<usize>) -> bool {
    digits.contains(&field.len()) && field.iter().all(u8::is_ascii_hexdigit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_the_standard_check_value() {
        assert_eq!(crc32(b"123456789"), 0xCBF4_3926);
        assert_eq!(crc32(b""), 0);
    }

    #[test]
    fn a_frame_reads_back_and_any_change_is_caught() {
        let line = frame(r#"{"type":"user","content":"hi"}"#);
        let line = line.strip_suffix('\n').unwrap();
        assert_eq!(unframe(line), Some(r#"{"type":"user","content":"hi"}"#));
        assert_eq!(unframe(&line.replace("hi", "ho")), None);
        assert_eq!(unframe(&line[..line.len() - 1]), None);
        assert_eq!(unframe("garbage"), None);
        // A sign or a short field is not a frame, though it would parse.
        assert_eq!(unframe(&format!("+{}", &line[1..])), None);
        assert_eq!(unframe(&line[1..]), None);
    }

    #[test]
    fn every_cut_of_a_frame_is_torn_and_nothing_else_is() {
        let line = frame(r#"{"type":"user","content":"hi"}"#);
        for cut in 1..line.len() {
            assert!(is_torn(&line.as_bytes()[..cut]), "cut at {cut}");
        }
        // A record past 4 GiB has a nine-digit length: still a frame.
        assert!(is_torn(b"100000000 12345678 {\"type\""));
        for foreign in [
            &b"\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"[..],
            b"root:x:0:0:root:/root:/bin/bash",
            b"\x89PNG\r",
            b" 0000001e",
            b"0000001e  {}",
            b"0000001e 1234 {}",
            b"0000001e xyzxyzxy {}",
            // More JSON than the length says.
            b"00000002 00000000 {}}",
            // A length no record has: past isize::MAX, or with more than
            // eight digits and a leading zero, whole or cut.
            b"ffffffffffffffff 00000000 {\"type\":",
            b"8000000000000000",
            b"000000000000001e 1234abcd {",
            b"000000001",
        ] {
            assert!(!is_torn(foreign), "{foreign:?}");
        }
    }
}
