//! Just enough DER to read a certificate's expiry date and its subject's
//! common name.

use std::time::Duration;

/// One element: its tag, its contents, and what follows it.
fn element(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let (bytes, rest) = rest.split_at(count);
        (
            bytes.iter().fold(0usize, |n, &b| (n << 8) | usize::from(b)),
            rest,
        )
    };
    (rest.len() >= len).then(|| (tag, &rest[..len], &rest[len..]))
}

/// The common name of a certificate's subject, if that is all its
/// subject says, and its `notAfter` as time since the Unix epoch.
pub fn name_and_expiry(cert: &[u8]) -> Option<(String, Duration)> {
    const SEQUENCE: u8 = 0x30;
    let (SEQUENCE, certificate, _) = element(cert)? else {
        return None;
    };
    let (SEQUENCE, tbs, _) = element(certificate)? else {
        return None;
    };
    let mut rest = tbs;
    // [0] version (optional), serial, signature algorithm, issuer.
    let (tag, _, after) = element(rest)?;
    if tag == 0xa0 {
        rest = after;
    }
    for _ in 0..3 {
        rest = element(rest)?.2;
    }
    let (SEQUENCE, validity, rest) = element(rest)? else {
        return None;
    };
    let (SEQUENCE, subject, _) = element(rest)? else {
        return None;
    };
    let (_, _, after_not_before) = element(validity)?;
    let (tag, time, _) = element(after_not_before)?;
    Some((common_name(subject)?, time_since_epoch(tag, time)?))
}

/// The value of a name that is one common name and nothing else.
fn common_name(name: &[u8]) -> Option<String> {
    const SET: u8 = 0x31;
    const COMMON_NAME: &[u8] = &[0x55, 0x04, 0x03];
    let (SET, attributes, rest) = element(name)? else {
        return None;
    };
    let (0x30, attribute, _) = element(attributes)? else {
        return None;
    };
    let (0x06, COMMON_NAME, value) = element(attribute)? else {
        return None;
    };
    // UTF8String or PrintableString.
    let (0x0c | 0x13, text, _) = element(value)? else {
        return None;
    };
    rest.is_empty()
        .then(|| String::from_utf8(text.to_vec()).ok())?
}

/// A UTCTime (tag 0x17) or GeneralizedTime (0x18) in UTC.
fn time_since_epoch(tag: u8, time: &[u8]) -> Option<Duration> {
    let text = std::str::from_utf8(time).ok()?;
    let (year, rest) = match tag {
        // UTCTime, YYMMDDHHMMSSZ: 50-99 are 1950-1999.
        0x17 => {
            let yy: u64 = text.get(..2)?.parse().ok()?;
            (if yy < 50 { 2000 + yy } else { 1900 + yy }, text.get(2..)?)
        }
        // GeneralizedTime, YYYYMMDDHHMMSSZ.
        0x18 => (text.get(..4)?.parse().ok()?, text.get(4..)?),
        _ => return None,
    };
    if rest.len() != 11 || !rest.ends_with('Z') {
        return None;
    }
    let field = |i: usize| rest.get(i..i + 2)?.parse::<u64>().ok();
    let (month, day) = (field(0)?, field(2)?);
    let (hour, minute, second) = (field(4)?, field(6)?, field(8)?);
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) || year < 1970 {
        return None;
    }
    let days = days_since_epoch(year, month, day);
    Some(Duration::from_secs(
        days * 86_400 + hour * 3600 + minute * 60 + second,
    ))
}

/// Days from 1970-01-01 to a date of the proleptic Gregorian calendar,
/// counted in 400-year eras from 0000-03-01.
fn days_since_epoch(year: u64, month: u64, day: u64) -> u64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year / 400;
    let year_of_era = year % 400;
    let month_from_march = (month + 9) % 12;
    let day_of_year = (153 * month_from_march + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    #[test]
    fn dates_count_from_the_epoch() {
        assert_eq!(super::days_since_epoch(1970, 1, 1), 0);
        assert_eq!(super::days_since_epoch(2000, 3, 1), 11_017);
        assert_eq!(super::days_since_epoch(2036, 2, 29), 24_165);
    }
}
