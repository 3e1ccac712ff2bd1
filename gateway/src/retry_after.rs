//! `Retry-After` (RFC 9110 §10.2.3): delay-seconds or an IMF-fixdate.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds to wait, or `None` when the header is absent or unreadable.
pub fn parse(value: &str, now: SystemTime) -> Option<u32> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        return Some(value.parse::<u64>().map_or(u32::MAX, saturate));
    }
    let at = imf_fixdate(value)?;
    let now = now.duration_since(UNIX_EPOCH).ok()?.as_secs() as i64;
    Some(saturate((at - now).max(0) as u64))
}

fn saturate(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

/// `Sun, 06 Nov 1994 08:49:37 GMT` → seconds since the epoch.
fn imf_fixdate(s: &str) -> Option<i64> {
    let (_, rest) = s.split_once(", ")?;
    let mut parts = rest.split(' ');
    let day: i64 = parts.next()?.parse().ok()?;
    let month = match parts.next()? {
        "Jan" => 1,
        "Feb" => 2,
        "Mar" => 3,
        "Apr" => 4,
        "May" => 5,
        "Jun" => 6,
        "Jul" => 7,
        "Aug" => 8,
        "Sep" => 9,
        "Oct" => 10,
        "Nov" => 11,
        "Dec" => 12,
        _ => return None,
    };
    let year: i64 = parts.next()?.parse().ok()?;
    let mut hms = parts.next()?.split(':');
    let h: i64 = hms.next()?.parse().ok()?;
    let m: i64 = hms.next()?.parse().ok()?;
    let sec: i64 = hms.next()?.parse().ok()?;
    if parts.next()? != "GMT" || parts.next().is_some() || hms.next().is_some() {
        return None;
    }
    if !(1..=31).contains(&day) || h > 23 || m > 59 || sec > 60 || !(1970..=9999).contains(&year) {
        return None;
    }
    Some(days_from_civil(year, month, day) * 86_400 + h * 3600 + m * 60 + sec)
}

/// Howard Hinnant's days_from_civil.
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn seconds_and_dates() {
        let now = UNIX_EPOCH + Duration::from_secs(784_111_777); // Sun, 06 Nov 1994 08:49:37 GMT
        assert_eq!(parse("120", now), Some(120));
        assert_eq!(parse(" 7 ", now), Some(7));
        assert_eq!(parse("99999999999999", now), Some(u32::MAX));
        assert_eq!(parse("Sun, 06 Nov 1994 08:49:37 GMT", now), Some(0));
        assert_eq!(parse("Sun, 06 Nov 1994 08:50:37 GMT", now), Some(60));
        assert_eq!(parse("Sat, 05 Nov 1994 08:49:37 GMT", now), Some(0));
        assert_eq!(parse("-1", now), None);
        assert_eq!(parse("soon", now), None);
        assert_eq!(parse("", now), None);
    }
}
