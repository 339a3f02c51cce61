//! Base64 (RFC 4648): the standard and the URL-safe alphabet, with or
//! without `=` padding.

/// Which 64 characters stand for the 6-bit groups.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Alphabet {
    /// RFC 4648 section 4: `A-Z a-z 0-9 + /`.
    Standard,
    /// RFC 4648 section 5: `A-Z a-z 0-9 - _` (URLs and file names).
    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    Url,
}

impl Alphabet {
    fn chars(self) -> &'static [u8; 64] {
        match self {
            Alphabet::Standard => {
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
            }
            Alphabet::Url => b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_",
        }
    }

    /// The value of `c` in this alphabet.
    fn value(self, c: u8) -> Option<u8> {
        match (c, self) {
            (b'A'..=b'Z', _) => Some(c - b'A'),
            (b'a'..=b'z', _) => Some(c - b'a' + 26),
            (b'0'..=b'9', _) => Some(c - b'0' + 52),
            (b'+', Alphabet::Standard) | (b'-', Alphabet::Url) => Some(62),
            (b'/', Alphabet::Standard) | (b'_', Alphabet::Url) => Some(63),
            _ => None,
        }
    }
}

/// Whether the encoder pads the output to a multiple of 4 with `=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Padding {
    /// `=` up to a multiple of 4 (what RFC 4648 requires by default).
    Padded,
    /// No `=` (PKCE, JWTs: RFC 7636 appendix A).
    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    Unpadded,
}

/// `bytes` in base64 with `alphabet` and `padding`.
pub(crate) fn encode(bytes: &[u8], alphabet: Alphabet, padding: Padding) -> String {
    let chars = alphabet.chars();
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        // A chunk of k bytes gives k + 1 characters, then padding to 4.
        for i in 0..=chunk.len() {
            out.push(char::from(chars[(n >> (18 - 6 * i)) as usize & 63]));
        }
        if padding == Padding::Padded {
            for _ in chunk.len()..3 {
                out.push('=');
            }
        }
    }
    out
}

/// `text` decoded, padded or not, each character read in the first of
/// `alphabets` that has it (pass both to accept either, as OAuth issuers
/// need); `None` on any other character. Bits left over after the last
/// whole byte are dropped, as most decoders do.
#[cfg_attr(not(feature = "mcp"), allow(dead_code))]
pub(crate) fn decode(text: &str, alphabets: &[Alphabet]) -> Option<Vec<u8>> {
    let text = text.trim_end_matches('=');
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for c in text.bytes() {
        let v = alphabets.iter().find_map(|a| a.value(c))?;
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4648 section 10.
    const VECTORS: [(&str, &str); 7] = [
        ("", ""),
        ("f", "Zg=="),
        ("fo", "Zm8="),
        ("foo", "Zm9v"),
        ("foob", "Zm9vYg=="),
        ("fooba", "Zm9vYmE="),
        ("foobar", "Zm9vYmFy"),
    ];

    #[test]
    fn rfc4648_vectors_encode_and_decode() {
        for (raw, encoded) in VECTORS {
            assert_eq!(
                encode(raw.as_bytes(), Alphabet::Standard, Padding::Padded),
                encoded
            );
            let bare = encoded.trim_end_matches('=');
            assert_eq!(
                encode(raw.as_bytes(), Alphabet::Url, Padding::Unpadded),
                bare
            );
            for text in [encoded, bare] {
                assert_eq!(
                    decode(text, &[Alphabet::Standard]).as_deref(),
                    Some(raw.as_bytes()),
                    "{text}"
                );
            }
        }
    }

    #[test]
    fn the_alphabets_differ_in_their_last_two_characters() {
        assert_eq!(
            encode(&[0xfb, 0xff], Alphabet::Standard, Padding::Padded),
            "+/8="
        );
        assert_eq!(
            encode(&[0xfb, 0xff], Alphabet::Url, Padding::Unpadded),
            "-_8"
        );
        assert_eq!(
            encode(&[0xff; 3], Alphabet::Standard, Padding::Padded),
            "////"
        );
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(encode(&all, Alphabet::Standard, Padding::Padded).len(), 344);
        for alphabet in [Alphabet::Standard, Alphabet::Url] {
            for padding in [Padding::Padded, Padding::Unpadded] {
                let text = encode(&all, alphabet, padding);
                assert_eq!(decode(&text, &[alphabet]).unwrap(), all);
            }
        }
    }

    #[test]
    fn decoding_reads_only_the_alphabets_given() {
        assert_eq!(decode("-_8", &[Alphabet::Url]).unwrap(), [0xfb, 0xff]);
        assert!(decode("-_8", &[Alphabet::Standard]).is_none());
        assert!(decode("+/8", &[Alphabet::Url]).is_none());
        let either = [Alphabet::Url, Alphabet::Standard];
        assert_eq!(decode("+/8=", &either).unwrap(), [0xfb, 0xff]);
        assert_eq!(decode("-_8", &either).unwrap(), [0xfb, 0xff]);
        assert!(decode("a b", &either).is_none());
        assert!(decode("Zg=\n", &either).is_none());
    }
}
