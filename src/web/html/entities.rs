//! Character references: `&amp;`, `&#233;`, `&#xE9;`.
//!
//! Named references cover the 252 HTML 4 entities (every Latin-1 letter,
//! the Greek alphabet, arrows, maths and typographic punctuation) plus
//! `&apos;`. HTML5 defines some 2,000 more names; a page that uses one keeps
//! it as written, which a reader still understands.
//!
//! # Differences from the HTML standard
//!
//! - Without a `;`, a name is decoded only when the whole run of letters and
//!   digits is a known name (`&copy 2024` but not `&copyright`); the standard
//!   also matches a known prefix for some legacy names.
//! - In attribute values a reference without `;` followed by `=` or a letter
//!   is kept, as the standard does for query strings (`?a=1&lang=en`).

/// Longest name looked up; longer runs are not references.
const MAX_NAME: usize = 32;
/// Most digits read in a numeric reference; more decode to U+FFFD.
const MAX_DIGITS: usize = 16;

/// Decode every character reference in `s`, appending to `out`.
pub(crate) fn decode_into(s: &str, in_attribute: bool, out: &mut String) {
    let bytes = s.as_bytes();
    let mut last = 0;
    let mut i = 0;
    while let Some(off) = memchr_amp(&bytes[i..]) {
        let amp = i + off;
        match reference(&s[amp + 1..], in_attribute) {
            Some((c, used)) => {
                out.push_str(&s[last..amp]);
                out.push(c);
                i = amp + 1 + used;
                last = i;
            }
            None => i = amp + 1,
        }
    }
    out.push_str(&s[last..]);
}

/// Decode every character reference in `s`.
pub(crate) fn decode(s: &str, in_attribute: bool) -> String {
    let mut out = String::with_capacity(s.len());
    decode_into(s, in_attribute, &mut out);
    out
}

fn memchr_amp(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'&')
}

/// The character a reference at the start of `rest` (just after `&`) stands
/// for, and how many bytes of `rest` it used.
fn reference(rest: &str, in_attribute: bool) -> Option<(char, usize)> {
    let b = rest.as_bytes();
    if b.first() == Some(&b'#') {
        return numeric(&rest[1..]).map(|(c, n)| (c, n + 1));
    }
    let len = b
        .iter()
        .take(MAX_NAME + 1)
        .take_while(|c| c.is_ascii_alphanumeric())
        .count();
    if len == 0 || len > MAX_NAME {
        return None;
    }
    let c = lookup(&rest[..len])?;
    match b.get(len) {
        Some(b';') => Some((c, len + 1)),
        Some(b'=') if in_attribute => None,
        _ => Some((c, len)),
    }
}

/// `123;`, `x7B;` or `X7b` after `&#`.
fn numeric(rest: &str) -> Option<(char, usize)> {
    let b = rest.as_bytes();
    let (radix, start) = match b.first() {
        Some(b'x' | b'X') => (16, 1),
        _ => (10, 0),
    };
    let digits = b[start..]
        .iter()
        .take_while(|c| {
            if radix == 16 {
                c.is_ascii_hexdigit()
            } else {
                c.is_ascii_digit()
            }
        })
        .count();
    if digits == 0 {
        return None;
    }
    let text = &rest[start..start + digits];
    let value = if digits > MAX_DIGITS {
        None
    } else {
        u32::from_str_radix(text, radix).ok()
    };
    let mut used = start + digits;
    if b.get(used) == Some(&b';') {
        used += 1;
    }
    Some((numeric_char(value), used))
}

/// The character for a numeric reference, as the standard maps it: NUL,
/// surrogates and out-of-range values become U+FFFD, and 0x80-0x9F are read
/// as windows-1252.
fn numeric_char(value: Option<u32>) -> char {
    match value {
        Some(v @ 0x80..=0x9F) => crate::web::charset::windows_1252(v as u8),
        Some(0) | None => char::REPLACEMENT_CHARACTER,
        Some(v) => char::from_u32(v).unwrap_or(char::REPLACEMENT_CHARACTER),
    }
}

fn lookup(name: &str) -> Option<char> {
    NAMED
        .binary_search_by(|(n, _)| n.cmp(&name))
        .ok()
        .map(|i| NAMED[i].1)
}

// Generated from Python's html.entities.name2codepoint (the 252 HTML 4 entities) plus &apos;.
// Sorted by name (byte order) for binary search.
pub(super) static NAMED: [(&str, char); 253] = [
    ("AElig", '\u{c6}'),
    ("Aacute", '\u{c1}'),
    ("Acirc", '\u{c2}'),
    ("Agrave", '\u{c0}'),
    ("Alpha", '\u{391}'),
    ("Aring", '\u{c5}'),
    ("Atilde", '\u{c3}'),
    ("Auml", '\u{c4}'),
    ("Beta", '\u{392}'),
    ("Ccedil", '\u{c7}'),
    ("Chi", '\u{3a7}'),
    ("Dagger", '\u{2021}'),
    ("Delta", '\u{394}'),
    ("ETH", '\u{d0}'),
    ("Eacute", '\u{c9}'),
    ("Ecirc", '\u{ca}'),
    ("Egrave", '\u{c8}'),
    ("Epsilon", '\u{395}'),
    ("Eta", '\u{397}'),
    ("Euml", '\u{cb}'),
    ("Gamma", '\u{393}'),
    ("Iacute", '\u{cd}'),
    ("Icirc", '\u{ce}'),
    ("Igrave", '\u{cc}'),
    ("Iota", '\u{399}'),
    ("Iuml", '\u{cf}'),
    ("Kappa", '\u{39a}'),
    ("Lambda", '\u{39b}'),
    ("Mu", '\u{39c}'),
    ("Ntilde", '\u{d1}'),
    ("Nu", '\u{39d}'),
    ("OElig", '\u{152}'),
    ("Oacute", '\u{d3}'),
    ("Ocirc", '\u{d4}'),
    ("Ograve", '\u{d2}'),
    ("Omega", '\u{3a9}'),
    ("Omicron", '\u{39f}'),
    ("Oslash", '\u{d8}'),
    ("Otilde", '\u{d5}'),
    ("Ouml", '\u{d6}'),
    ("Phi", '\u{3a6}'),
    ("Pi", '\u{3a0}'),
    ("Prime", '\u{2033}'),
    ("Psi", '\u{3a8}'),
    ("Rho", '\u{3a1}'),
    ("Scaron", '\u{160}'),
    ("Sigma", '\u{3a3}'),
    ("THORN", '\u{de}'),
    ("Tau", '\u{3a4}'),
    ("Theta", '\u{398}'),
    ("Uacute", '\u{da}'),
    ("Ucirc", '\u{db}'),
    ("Ugrave", '\u{d9}'),
    ("Upsilon", '\u{3a5}'),
    ("Uuml", '\u{dc}'),
    ("Xi", '\u{39e}'),
    ("Yacute", '\u{dd}'),
    ("Yuml", '\u{178}'),
    ("Zeta", '\u{396}'),
    ("aacute", '\u{e1}'),
    ("acirc", '\u{e2}'),
    ("acute", '\u{b4}'),
    ("aelig", '\u{e6}'),
    ("agrave", '\u{e0}'),
    ("alefsym", '\u{2135}'),
    ("alpha", '\u{3b1}'),
    ("amp", '\u{26}'),
    ("and", '\u{2227}'),
    ("ang", '\u{2220}'),
    ("apos", '\u{27}'),
    ("aring", '\u{e5}'),
    ("asymp", '\u{2248}'),
    ("atilde", '\u{e3}'),
    ("auml", '\u{e4}'),
    ("bdquo", '\u{201e}'),
    ("beta", '\u{3b2}'),
    ("brvbar", '\u{a6}'),
    ("bull", '\u{2022}'),
    ("cap", '\u{2229}'),
    ("ccedil", '\u{e7}'),
    ("cedil", '\u{b8}'),
    ("cent", '\u{a2}'),
    ("chi", '\u{3c7}'),
    ("circ", '\u{2c6}'),
    ("clubs", '\u{2663}'),
    ("cong", '\u{2245}'),
    ("copy", '\u{a9}'),
    ("crarr", '\u{21b5}'),
    ("cup", '\u{222a}'),
    ("curren", '\u{a4}'),
    ("dArr", '\u{21d3}'),
    ("dagger", '\u{2020}'),
    ("darr", '\u{2193}'),
    ("deg", '\u{b0}'),
    ("delta", '\u{3b4}'),
    ("diams", '\u{2666}'),
    ("divide", '\u{f7}'),
    ("eacute", '\u{e9}'),
    ("ecirc", '\u{ea}'),
    ("egrave", '\u{e8}'),
    ("empty", '\u{2205}'),
    ("emsp", '\u{2003}'),
    ("ensp", '\u{2002}'),
    ("epsilon", '\u{3b5}'),
    ("equiv", '\u{2261}'),
    ("eta", '\u{3b7}'),
    ("eth", '\u{f0}'),
    ("euml", '\u{eb}'),
    ("euro", '\u{20ac}'),
    ("exist", '\u{2203}'),
    ("fnof", '\u{192}'),
    ("forall", '\u{2200}'),
    ("frac12", '\u{bd}'),
    ("frac14", '\u{bc}'),
    ("frac34", '\u{be}'),
    ("frasl", '\u{2044}'),
    ("gamma", '\u{3b3}'),
    ("ge", '\u{2265}'),
    ("gt", '\u{3e}'),
    ("hArr", '\u{21d4}'),
    ("harr", '\u{2194}'),
    ("hearts", '\u{2665}'),
    ("hellip", '\u{2026}'),
    ("iacute", '\u{ed}'),
    ("icirc", '\u{ee}'),
    ("iexcl", '\u{a1}'),
    ("igrave", '\u{ec}'),
    ("image", '\u{2111}'),
    ("infin", '\u{221e}'),
    ("int", '\u{222b}'),
    ("iota", '\u{3b9}'),
    ("iquest", '\u{bf}'),
    ("isin", '\u{2208}'),
    ("iuml", '\u{ef}'),
    ("kappa", '\u{3ba}'),
    ("lArr", '\u{21d0}'),
    ("lambda", '\u{3bb}'),
    ("lang", '\u{2329}'),
    ("laquo", '\u{ab}'),
    ("larr", '\u{2190}'),
    ("lceil", '\u{2308}'),
    ("ldquo", '\u{201c}'),
    ("le", '\u{2264}'),
    ("lfloor", '\u{230a}'),
    ("lowast", '\u{2217}'),
    ("loz", '\u{25ca}'),
    ("lrm", '\u{200e}'),
    ("lsaquo", '\u{2039}'),
    ("lsquo", '\u{2018}'),
    ("lt", '\u{3c}'),
    ("macr", '\u{af}'),
    ("mdash", '\u{2014}'),
    ("micro", '\u{b5}'),
    ("middot", '\u{b7}'),
    ("minus", '\u{2212}'),
    ("mu", '\u{3bc}'),
    ("nabla", '\u{2207}'),
    ("nbsp", '\u{a0}'),
    ("ndash", '\u{2013}'),
    ("ne", '\u{2260}'),
    ("ni", '\u{220b}'),
    ("not", '\u{ac}'),
    ("notin", '\u{2209}'),
    ("nsub", '\u{2284}'),
    ("ntilde", '\u{f1}'),
    ("nu", '\u{3bd}'),
    ("oacute", '\u{f3}'),
    ("ocirc", '\u{f4}'),
    ("oelig", '\u{153}'),
    ("ograve", '\u{f2}'),
    ("oline", '\u{203e}'),
    ("omega", '\u{3c9}'),
    ("omicron", '\u{3bf}'),
    ("oplus", '\u{2295}'),
    ("or", '\u{2228}'),
    ("ordf", '\u{aa}'),
    ("ordm", '\u{ba}'),
    ("oslash", '\u{f8}'),
    ("otilde", '\u{f5}'),
    ("otimes", '\u{2297}'),
    ("ouml", '\u{f6}'),
    ("para", '\u{b6}'),
    ("part", '\u{2202}'),
    ("permil", '\u{2030}'),
    ("perp", '\u{22a5}'),
    ("phi", '\u{3c6}'),
    ("pi", '\u{3c0}'),
    ("piv", '\u{3d6}'),
    ("plusmn", '\u{b1}'),
    ("pound", '\u{a3}'),
    ("prime", '\u{2032}'),
    ("prod", '\u{220f}'),
    ("prop", '\u{221d}'),
    ("psi", '\u{3c8}'),
    ("quot", '\u{22}'),
    ("rArr", '\u{21d2}'),
    ("radic", '\u{221a}'),
    ("rang", '\u{232a}'),
    ("raquo", '\u{bb}'),
    ("rarr", '\u{2192}'),
    ("rceil", '\u{2309}'),
    ("rdquo", '\u{201d}'),
    ("real", '\u{211c}'),
    ("reg", '\u{ae}'),
    ("rfloor", '\u{230b}'),
    ("rho", '\u{3c1}'),
    ("rlm", '\u{200f}'),
    ("rsaquo", '\u{203a}'),
    ("rsquo", '\u{2019}'),
    ("sbquo", '\u{201a}'),
    ("scaron", '\u{161}'),
    ("sdot", '\u{22c5}'),
    ("sect", '\u{a7}'),
    ("shy", '\u{ad}'),
    ("sigma", '\u{3c3}'),
    ("sigmaf", '\u{3c2}'),
    ("sim", '\u{223c}'),
    ("spades", '\u{2660}'),
    ("sub", '\u{2282}'),
    ("sube", '\u{2286}'),
    ("sum", '\u{2211}'),
    ("sup", '\u{2283}'),
    ("sup1", '\u{b9}'),
    ("sup2", '\u{b2}'),
    ("sup3", '\u{b3}'),
    ("supe", '\u{2287}'),
    ("szlig", '\u{df}'),
    ("tau", '\u{3c4}'),
    ("there4", '\u{2234}'),
    ("theta", '\u{3b8}'),
    ("thetasym", '\u{3d1}'),
    ("thinsp", '\u{2009}'),
    ("thorn", '\u{fe}'),
    ("tilde", '\u{2dc}'),
    ("times", '\u{d7}'),
    ("trade", '\u{2122}'),
    ("uArr", '\u{21d1}'),
    ("uacute", '\u{fa}'),
    ("uarr", '\u{2191}'),
    ("ucirc", '\u{fb}'),
    ("ugrave", '\u{f9}'),
    ("uml", '\u{a8}'),
    ("upsih", '\u{3d2}'),
    ("upsilon", '\u{3c5}'),
    ("uuml", '\u{fc}'),
    ("weierp", '\u{2118}'),
    ("xi", '\u{3be}'),
    ("yacute", '\u{fd}'),
    ("yen", '\u{a5}'),
    ("yuml", '\u{ff}'),
    ("zeta", '\u{3b6}'),
    ("zwj", '\u{200d}'),
    ("zwnj", '\u{200c}'),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_sorted() {
        assert!(NAMED.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn named_numeric_and_broken() {
        let d = |s| decode(s, false);
        assert_eq!(
            d("a &amp; b &lt;c&gt; &quot;q&quot; &apos;"),
            "a & b <c> \"q\" '"
        );
        assert_eq!(
            d("caf&eacute; &Eacute; &euro;&hellip; &mdash;"),
            "café É €… —"
        );
        assert_eq!(d("&#233;&#xE9;&#XE9;&#x1F600;"), "ééé😀");
        assert_eq!(
            d("&#0; &#xD800; &#x110000; &#99999999999999999999;"),
            "\u{FFFD} \u{FFFD} \u{FFFD} \u{FFFD}"
        );
        assert_eq!(d("&#150;"), "–");
        assert_eq!(
            d("&copy 2024 &copyright &unknown; & &; &# &#x; &"),
            "© 2024 &copyright &unknown; & &; &# &#x; &"
        );
        assert_eq!(d("&AMP; &Alpha;&alpha;"), "&AMP; Αα");
    }

    #[test]
    fn attributes_keep_query_strings() {
        assert_eq!(decode("?a=1&lang=en&amp;b", true), "?a=1&lang=en&b");
        assert_eq!(decode("?x&lt=1", true), "?x&lt=1");
        assert_eq!(decode("?x&lt=1", false), "?x<=1");
    }
}
