//! [`Image`]'s constructors: from bytes (the media type sniffed from the
//! magic bytes), from a file, from a URL; the size bound. The bytes are
//! sent as standard base64 ([`crate::codec::base64`]).
//!
//! The encoders of each API read [`Image::source`] and
//! [`Image::media_type`]; chat completions sends an `image_url` part whose
//! URL is [`Image::url`].

use std::borrow::Cow;
use std::io::Read;
use std::path::Path;

use crate::codec::base64::{self, Alphabet, Padding};
use crate::{Error, Image, ImageSource, Result};

impl Image {
    /// The largest image accepted, in raw bytes (20 MiB): OpenAI's limit
    /// per image; Anthropic's is lower (5 MB through the API), and a
    /// server refuses what it will not take (see
    /// [`ErrorKind::ImageUnsupported`](crate::ErrorKind::ImageUnsupported)
    /// for a model that takes none).
    pub const MAX_BYTES: usize = 20 * 1024 * 1024;

    /// An image from its bytes, the media type read from its magic bytes:
    /// PNG, JPEG, GIF or WebP, the formats every API with vision accepts.
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when the bytes are none of those formats or
    /// are more than [`Image::MAX_BYTES`].
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{Image, ImageSource};
    /// let png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
    /// let image = Image::from_bytes(png)?;
    /// assert_eq!(image.media_type, "image/png");
    /// assert_eq!(image.source, ImageSource::Base64("iVBORw0KGgoAAAANSUhEUg==".into()));
    /// assert!(image.url().starts_with("data:image/png;base64,iVBOR"));
    /// assert!(Image::from_bytes(b"plain text").is_err());
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn from_bytes(bytes: &[u8]) -> Result<Image> {
        check_size(bytes.len() as u64)?;
        let media_type = sniff(bytes).ok_or_else(|| {
            Error::invalid(
                "not an image pikuri can send: expected PNG, JPEG, GIF or WebP bytes".to_string(),
            )
        })?;
        Ok(Image {
            media_type: media_type.to_string(),
            source: ImageSource::Base64(base64::encode(bytes, Alphabet::Standard, Padding::Padded)),
        })
    }

    /// An image read from a file (see [`from_bytes`](Image::from_bytes):
    /// the media type comes from the bytes, not the name).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] when the file cannot be read or is not a
    /// regular file (a FIFO, a device; naming it), is larger than
    /// [`Image::MAX_BYTES`] (checked before it is read), or is not a PNG,
    /// JPEG, GIF or WebP image.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Image> {
        let path = path.as_ref();
        let fail = |e: std::io::Error| {
            Error::invalid(format!("cannot read image {}: {e}", path.display()))
        };
        // A FIFO would block the open until a writer came, a device never end.
        if !std::fs::metadata(path).map_err(fail)?.is_file() {
            return Err(Error::invalid(format!(
                "cannot read image {}: not a regular file",
                path.display()
            )));
        }
        let file = std::fs::File::open(path).map_err(fail)?;
        if let Ok(meta) = file.metadata() {
            check_size(meta.len())?;
        }
        // The file may grow between the check and the read: one byte over
        // the bound tells "at the bound" from "over it".
        let mut bytes = Vec::new();
        file.take(Image::MAX_BYTES as u64 + 1)
            .read_to_end(&mut bytes)
            .map_err(fail)?;
        Image::from_bytes(&bytes)
    }

    /// An image the provider fetches itself from `url` (`http` or
    /// `https`), or a `data:` URL (`data:image/png;base64,...`), which is
    /// kept as its bytes. The media type of an `http(s)` URL is guessed
    /// from its extension (empty when unknown: chat completions and
    /// Anthropic do not need it for a URL).
    ///
    /// # Errors
    ///
    /// [`Error::InvalidInput`] for another scheme, a `data:` URL that is not
    /// a base64 image, or one over [`Image::MAX_BYTES`].
    ///
    /// # Examples
    ///
    /// ```
    /// use pikuri::{Image, ImageSource};
    /// let image = Image::from_url("https://example.com/cat.JPG?size=large")?;
    /// assert_eq!(image.media_type, "image/jpeg");
    /// assert_eq!(image.url(), "https://example.com/cat.JPG?size=large");
    ///
    /// let inline = Image::from_url("data:image/gif;base64,R0lGODlh")?;
    /// assert_eq!(inline.source, ImageSource::Base64("R0lGODlh".into()));
    /// assert!(Image::from_url("file:///etc/passwd").is_err());
    /// # Ok::<(), pikuri::Error>(())
    /// ```
    pub fn from_url(url: &str) -> Result<Image> {
        let lower = url.get(..8).unwrap_or(url).to_ascii_lowercase();
        if lower.starts_with("data:") {
            return from_data_url(url);
        }
        if !(lower.starts_with("http://") || lower.starts_with("https://")) {
            return Err(Error::invalid(format!(
                "an image URL must be http, https or data: {}",
                crate::util::excerpt(url, 100)
            )));
        }
        let path = url.split(['?', '#']).next().unwrap_or(url);
        let ext = path
            .rsplit_once('.')
            .map(|(_, ext)| ext.to_ascii_lowercase())
            .unwrap_or_default();
        let media_type = match ext.as_str() {
            "png" => "image/png",
            "jpg" | "jpeg" => "image/jpeg",
            "gif" => "image/gif",
            "webp" => "image/webp",
            _ => "",
        };
        Ok(Image {
            media_type: media_type.to_string(),
            source: ImageSource::Url(url.to_string()),
        })
    }

    /// The image as a URL: the URL itself, or a `data:` URL of the bytes
    /// (what chat completions' `image_url` takes).
    pub fn url(&self) -> Cow<'_, str> {
        match &self.source {
            ImageSource::Url(url) => Cow::Borrowed(url),
            ImageSource::Base64(data) => {
                Cow::Owned(format!("data:{};base64,{data}", self.media_type))
            }
        }
    }
}

/// `data:<media type>;base64,<data>`, kept as base64.
fn from_data_url(url: &str) -> Result<Image> {
    let bad = || Error::invalid("a data: image URL must be data:image/...;base64,<data>");
    let (head, data) = url[5..].split_once(',').ok_or_else(bad)?;
    let media_type = head.strip_suffix(";base64").ok_or_else(bad)?;
    if !media_type.to_ascii_lowercase().starts_with("image/")
        || !data
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'='))
    {
        return Err(bad());
    }
    check_size(data.len() as u64 / 4 * 3)?;
    Ok(Image {
        media_type: media_type.to_ascii_lowercase(),
        source: ImageSource::Base64(data.to_string()),
    })
}

fn check_size(len: u64) -> Result<()> {
    if len > Image::MAX_BYTES as u64 {
        return Err(Error::invalid(format!(
            "image too large: {len} bytes, the limit is {} (Image::MAX_BYTES)",
            Image::MAX_BYTES
        )));
    }
    Ok(())
}

/// The media type of an image from its first bytes.
fn sniff(bytes: &[u8]) -> Option<&'static str> {
    if bytes.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if bytes.starts_with(b"\xff\xd8\xff") {
        Some("image/jpeg")
    } else if bytes.starts_with(b"GIF87a") || bytes.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if bytes.len() >= 12 && bytes.starts_with(b"RIFF") && &bytes[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sniffs_the_four_formats() {
        assert_eq!(sniff(b"\x89PNG\r\n\x1a\nrest"), Some("image/png"));
        assert_eq!(sniff(b"\xff\xd8\xff\xe0"), Some("image/jpeg"));
        assert_eq!(sniff(b"GIF89a..."), Some("image/gif"));
        assert_eq!(sniff(b"GIF87a"), Some("image/gif"));
        assert_eq!(sniff(b"RIFF\x10\0\0\0WEBPVP8 "), Some("image/webp"));
        assert_eq!(sniff(b"RIFF\x10\0\0\0WAVEfmt "), None);
        assert_eq!(sniff(b"\x89PN"), None);
        assert_eq!(sniff(b""), None);
    }

    #[test]
    fn size_bound() {
        let mut big = b"\x89PNG\r\n\x1a\n".to_vec();
        big.resize(Image::MAX_BYTES, 0);
        assert!(Image::from_bytes(&big).is_ok());
        big.push(0);
        let err = Image::from_bytes(&big).unwrap_err();
        assert_eq!(err.kind(), crate::ErrorKind::InvalidInput);
        assert!(err.to_string().contains("image too large"), "{err}");
    }

    #[test]
    fn data_urls() {
        assert!(Image::from_url("data:text/plain;base64,aGk=").is_err());
        assert!(Image::from_url("data:image/png,raw").is_err());
        assert!(Image::from_url("data:image/png;base64,<script>").is_err());
        let ok = Image::from_url("DATA:image/PNG;base64,iVBO").unwrap();
        assert_eq!(ok.media_type, "image/png");
        assert_eq!(ok.url(), "data:image/png;base64,iVBO");
    }
}
