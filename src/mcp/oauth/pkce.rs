//! The byte-level pieces of the flow, with no I/O beyond the system's
//! random source: SHA-256 (FIPS 180-4, written here to keep the dependency
//! list as it is), unpadded base64url (RFC 4648 §5, through
//! [`crate::codec::base64`]), the PKCE pair (RFC 7636, method `S256`
//! only) and random `state` values. Forms are [`crate::codec::percent`]'s.

use std::hash::{BuildHasher, RandomState};
use std::io::Read;

use super::AuthError;

use crate::codec::base64::{self, Alphabet, Padding};

/// SHA-256 round constants: the first 32 bits of the fractional parts of
/// the cube roots of the first 64 primes.
const K: [u32; 64] = [
    0x428a_2f98,
    0x7137_4491,
    0xb5c0_fbcf,
    0xe9b5_dba5,
    0x3956_c25b,
    0x59f1_11f1,
    0x923f_82a4,
    0xab1c_5ed5,
    0xd807_aa98,
    0x1283_5b01,
    0x2431_85be,
    0x550c_7dc3,
    0x72be_5d74,
    0x80de_b1fe,
    0x9bdc_06a7,
    0xc19b_f174,
    0xe49b_69c1,
    0xefbe_4786,
    0x0fc1_9dc6,
    0x240c_a1cc,
    0x2de9_2c6f,
    0x4a74_84aa,
    0x5cb0_a9dc,
    0x76f9_88da,
    0x983e_5152,
    0xa831_c66d,
    0xb003_27c8,
    0xbf59_7fc7,
    0xc6e0_0bf3,
    0xd5a7_9147,
    0x06ca_6351,
    0x1429_2967,
    0x27b7_0a85,
    0x2e1b_2138,
    0x4d2c_6dfc,
    0x5338_0d13,
    0x650a_7354,
    0x766a_0abb,
    0x81c2_c92e,
    0x9272_2c85,
    0xa2bf_e8a1,
    0xa81a_664b,
    0xc24b_8b70,
    0xc76c_51a3,
    0xd192_e819,
    0xd699_0624,
    0xf40e_3585,
    0x106a_a070,
    0x19a4_c116,
    0x1e37_6c08,
    0x2748_774c,
    0x34b0_bcb5,
    0x391c_0cb3,
    0x4ed8_aa4a,
    0x5b9c_ca4f,
    0x682e_6ff3,
    0x748f_82ee,
    0x78a5_636f,
    0x84c8_7814,
    0x8cc7_0208,
    0x90be_fffa,
    0xa450_6ceb,
    0xbef9_a3f7,
    0xc671_78f2,
];

/// The SHA-256 digest of `data`.
#[allow(
    clippy::many_single_char_names,
    reason = "the names of FIPS 180-4 §6.2.2"
)]
pub(super) fn sha256(data: &[u8]) -> [u8; 32] {
    let mut h: [u32; 8] = [
        0x6a09_e667,
        0xbb67_ae85,
        0x3c6e_f372,
        0xa54f_f53a,
        0x510e_527f,
        0x9b05_688c,
        0x1f83_d9ab,
        0x5be0_cd19,
    ];
    // Padding: a 1 bit, zeros up to 56 mod 64 bytes, then the bit length.
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64).wrapping_mul(8)).to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 64];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..64 {
            let s0 = w[i - 15].rotate_right(7) ^ w[i - 15].rotate_right(18) ^ (w[i - 15] >> 3);
            let s1 = w[i - 2].rotate_right(17) ^ w[i - 2].rotate_right(19) ^ (w[i - 2] >> 10);
            w[i] = w[i - 16]
                .wrapping_add(s0)
                .wrapping_add(w[i - 7])
                .wrapping_add(s1);
        }
        let [mut a, mut b, mut c, mut d, mut e, mut f, mut g, mut hh] = h;
        for i in 0..64 {
            let s1 = e.rotate_right(6) ^ e.rotate_right(11) ^ e.rotate_right(25);
            let ch = (e & f) ^ (!e & g);
            let t1 = hh
                .wrapping_add(s1)
                .wrapping_add(ch)
                .wrapping_add(K[i])
                .wrapping_add(w[i]);
            let s0 = a.rotate_right(2) ^ a.rotate_right(13) ^ a.rotate_right(22);
            let maj = (a & b) ^ (a & c) ^ (b & c);
            let t2 = s0.wrapping_add(maj);
            hh = g;
            g = f;
            f = e;
            e = d.wrapping_add(t1);
            d = c;
            c = b;
            b = a;
            a = t1.wrapping_add(t2);
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e, f, g, hh]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 32];
    for (chunk, word) in out.chunks_exact_mut(4).zip(h) {
        chunk.copy_from_slice(&word.to_be_bytes());
    }
    out
}

/// Unpadded base64url (RFC 4648 section 5), as PKCE (RFC 7636 appendix A)
/// and JWTs write it.
pub(super) fn base64url(bytes: &[u8]) -> String {
    base64::encode(bytes, Alphabet::Url, Padding::Unpadded)
}

/// Decode base64url, padded or not; standard base64's `+` and `/` are
/// accepted too (some issuers use them). `None` on any other character.
pub(super) fn base64url_decode(text: &str) -> Option<Vec<u8>> {
    base64::decode(text, &[Alphabet::Url, Alphabet::Standard])
}

/// Where random bytes come from: a seam, so that a test can take a source
/// away. [`SYSTEM`] is the real one.
///
/// # Why `RandomState`, and its limits
///
/// The first source is `/dev/urandom` (every Unix). Where there is none
/// (every Windows host, and sandboxes without `/dev`), the crate may not
/// add a dependency such as `getrandom`, so it takes std's
/// [`RandomState`]: std seeds its 128-bit SipHash keys from the operating
/// system's generator once per thread (`getrandom`/`arc4random` on Unix,
/// `ProcessPrng` or `BCryptGenRandom` on Windows) and gives each new
/// `RandomState` of that thread the next key (the first half plus one).
/// Hashing a counter under fresh states and stretching the outputs with
/// SHA-256 yields bytes no one predicts without those keys. The limits:
/// the secret is at most the 128 bits of one thread's keys (the states of
/// one thread share half of them), SipHash-1-3 is built against
/// hash flooding, not as a published random generator, and std does not
/// promise any of this in its API. And on a target where std has no
/// generator (some WebAssembly and UEFI targets) the keys are constants:
/// two fresh threads then hash alike, which [`random_bytes_from`] checks,
/// refusing with [`AuthError::Local`] rather than handing out guessable
/// values. The clock, the process id and addresses are never used.
pub(super) struct Sources {
    /// Fill the buffer from the system's random device.
    pub(super) device: fn(&mut [u8]) -> std::io::Result<()>,
    /// Hash `n` under a fresh hasher keyed by the operating system.
    pub(super) keyed: fn(u64) -> u64,
}

/// The system's sources: `/dev/urandom`, then std's [`RandomState`].
pub(super) const SYSTEM: Sources = Sources {
    device: |buf| std::fs::File::open("/dev/urandom")?.read_exact(buf),
    keyed: |n| RandomState::new().hash_one(n),
};

/// `n` random bytes from the system's sources; see [`Sources`].
pub(super) fn random_bytes(n: usize) -> Result<Vec<u8>, AuthError> {
    random_bytes_from(&SYSTEM, n)
}

/// `n` random bytes from `sources`: the device, else the OS-keyed hasher
/// (after checking that its keys are not constants), else an error.
pub(super) fn random_bytes_from(sources: &Sources, n: usize) -> Result<Vec<u8>, AuthError> {
    let mut out = vec![0u8; n];
    if (sources.device)(&mut out).is_ok() {
        return Ok(out);
    }
    // Constant keys hash alike on two fresh threads (a thread's first
    // state has its thread's seed); seeded ones differ but once in 2^64.
    let keyed = sources.keyed;
    let fresh = || std::thread::spawn(move || keyed(0)).join().ok();
    let (a, b) = (fresh(), fresh());
    if a.is_none() || a == b {
        return Err(AuthError::Local(
            "this platform offers no random source seeded by the operating system \
             (no /dev/urandom, and std's hasher keys are constants): \
             a PKCE verifier or state would be guessable"
                .into(),
        ));
    }
    // 256 bits of hasher output from four fresh states, stretched.
    let mut seed = Vec::with_capacity(32);
    for i in 0..4u64 {
        seed.extend_from_slice(&keyed(i).to_le_bytes());
    }
    let mut block = sha256(&seed);
    out.clear();
    while out.len() < n {
        out.extend_from_slice(&block);
        block = sha256(&block);
    }
    out.truncate(n);
    Ok(out)
}

/// A PKCE verifier (43 characters from 32 random bytes) and its `S256`
/// challenge.
pub(super) struct Pkce {
    pub(super) verifier: String,
    pub(super) challenge: String,
}

impl Pkce {
    pub(super) fn new() -> Result<Pkce, AuthError> {
        Ok(Pkce::from_verifier(base64url(&random_bytes(32)?)))
    }

    pub(super) fn from_verifier(verifier: String) -> Pkce {
        let challenge = base64url(&sha256(verifier.as_bytes()));
        Pkce {
            verifier,
            challenge,
        }
    }
}

/// A random `state` value.
pub(super) fn random_state() -> Result<String, AuthError> {
    Ok(base64url(&random_bytes(24)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt::Write as _;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
    }

    #[test]
    fn sha256_matches_the_fips_vectors() {
        // FIPS 180-4 examples and the NIST short and long messages.
        assert_eq!(
            hex(&sha256(b"")),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            hex(&sha256(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hex(&sha256(
                b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"
            )),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
        );
        assert_eq!(
            hex(&sha256(&vec![b'a'; 1_000_000])),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"
        );
        // 55, 56 and 64 bytes: the padding edges.
        assert_eq!(
            hex(&sha256(&[b'a'; 55])),
            "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318"
        );
        assert_eq!(
            hex(&sha256(&[b'a'; 56])),
            "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a"
        );
        assert_eq!(
            hex(&sha256(&[b'a'; 64])),
            "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb"
        );
    }

    #[test]
    fn pkce_s256_matches_rfc_7636_appendix_b() {
        let pkce = Pkce::from_verifier("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk".into());
        assert_eq!(
            pkce.challenge,
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let fresh = Pkce::new().unwrap();
        assert_eq!(fresh.verifier.len(), 43);
        assert_ne!(fresh.verifier, Pkce::new().unwrap().verifier);
    }

    fn no_device(_: &mut [u8]) -> std::io::Result<()> {
        Err(std::io::ErrorKind::NotFound.into())
    }

    /// Without a random device (Windows), the bytes come from std's
    /// OS-keyed hasher: unpredictable, not a function of the clock and
    /// the process.
    #[test]
    fn without_a_device_the_bytes_come_from_the_os_keyed_hasher() {
        let windows = Sources {
            device: no_device,
            keyed: SYSTEM.keyed,
        };
        let draws: Vec<Vec<u8>> = (0..8)
            .map(|_| random_bytes_from(&windows, 32).unwrap())
            .collect();
        for (i, a) in draws.iter().enumerate() {
            assert_eq!(a.len(), 32);
            assert!(draws[i + 1..].iter().all(|b| b != a), "a repeated draw");
        }
    }

    /// A platform whose std hasher has constant keys (no OS generator) is
    /// refused with a typed error, never given guessable values.
    #[test]
    fn a_hasher_with_constant_keys_is_refused() {
        let unseeded = Sources {
            device: no_device,
            keyed: |n| {
                std::hash::BuildHasherDefault::<std::hash::DefaultHasher>::default().hash_one(n)
            },
        };
        match random_bytes_from(&unseeded, 32) {
            Err(AuthError::Local(why)) => assert!(why.contains("no random source"), "{why}"),
            other => panic!("expected a refusal, got {other:?}"),
        }
        // With a device, the device's bytes are taken as they are.
        let device = Sources {
            device: |buf| {
                buf.fill(7);
                Ok(())
            },
            keyed: unseeded.keyed,
        };
        assert_eq!(random_bytes_from(&device, 4).unwrap(), vec![7; 4]);
    }

    #[test]
    fn base64url_round_trips() {
        for n in 0..10 {
            let data: Vec<u8> = (0..n)
                .map(|i: u8| i.wrapping_mul(37).wrapping_add(250))
                .collect();
            assert_eq!(base64url_decode(&base64url(&data)).unwrap(), data);
        }
        assert_eq!(base64url(b"\xfb\xff"), "-_8");
        assert!(base64url_decode("a b").is_none());
    }
}
