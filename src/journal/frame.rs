//! One record as one line of the file store: `<len> <crc32> <json>\n`,
//! with the length and the CRC-32 (IEEE) of the JSON in eight hex digits
//! each. A line whose length, checksum or end does not match is damaged:
//! the last line of a file may be (a crash mid-write tore it), any other
//! may not (see `FileStore`).

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
    let len = usize::from_str_radix(len, 16).ok()?;
    let crc = u32::from_str_radix(crc, 16).ok()?;
    (json.len() == len && crc32(json.as_bytes()) == crc).then_some(json)
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
    }
}
