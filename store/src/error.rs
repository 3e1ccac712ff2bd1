//! Shared by the library's typed errors.

/// `e` and every error in its `source()` chain, joined by ": ": what
/// `anyhow` prints for `{:#}`, for a typed error shown without anyhow.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut next = e.source();
    while let Some(cause) = next {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        next = cause.source();
    }
    text
}
