//! Reading chosen members of a JSON object with the [`Scanner`], borrowed from the text
//! and without building the rest: what the transport reads of a message's params
//! (`name`, `uri`, the protocol keys of `_meta`) and where a client splices its own.

use std::borrow::Cow;

use super::scan::{Scanner, StrToken, unescape};

/// Why an object could not be read as asked: not an object, a read member of the wrong
/// type or given twice, or an escape no string can hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WrongShape;

/// Walks the object at the cursor, handing each member's key (unescaped) to `each`,
/// which consumes its value.
pub(crate) fn members<'a>(
    scan: &mut Scanner<'a>,
    text: &'a str,
    mut each: impl FnMut(&mut Scanner<'a>, &str) -> Result<(), WrongShape>,
) -> Result<(), WrongShape> {
    scan.expect(b'{').map_err(|_| WrongShape)?;
    scan.enter().map_err(|_| WrongShape)?;
    if !scan.eat(b'}') {
        loop {
            let key = scan.member_key().map_err(|_| WrongShape)?;
            each(scan, &token(text, key)?)?;
            if scan.eat(b'}') {
                break;
            }
            scan.expect(b',').map_err(|_| WrongShape)?;
        }
    }
    scan.leave();
    Ok(())
}

/// Marks a read member seen; a second one is refused, as serde refuses a duplicate
/// field.
pub(crate) fn first(seen: &mut bool) -> Result<(), WrongShape> {
    if std::mem::replace(seen, true) {
        return Err(WrongShape);
    }
    Ok(())
}

/// A string or `null` at the cursor.
pub(crate) fn string<'a>(
    scan: &mut Scanner<'a>,
    text: &'a str,
) -> Result<Option<Cow<'a, str>>, WrongShape> {
    if null(scan)? {
        return Ok(None);
    }
    if scan.peek() != Some(b'"') {
        return Err(WrongShape);
    }
    let token = scan.string().map_err(|_| WrongShape)?;
    self::token(text, token).map(Some)
}

/// Consumes a `null` at the cursor, if that is what it is.
pub(crate) fn null(scan: &mut Scanner<'_>) -> Result<bool, WrongShape> {
    if scan.peek() != Some(b'n') {
        return Ok(false);
    }
    scan.value().map_err(|_| WrongShape)?;
    Ok(true)
}

/// Skips the value at the cursor.
pub(crate) fn skip(scan: &mut Scanner<'_>) -> Result<(), WrongShape> {
    scan.value().map(drop).map_err(|_| WrongShape)
}

/// A string token's text, unescaped if it holds an escape.
pub(crate) fn token(text: &str, token: StrToken) -> Result<Cow<'_, str>, WrongShape> {
    let body = text.get(token.start..token.end).ok_or(WrongShape)?;
    if !token.escaped {
        return Ok(Cow::Borrowed(body));
    }
    unescape(body).map(Cow::Owned).ok_or(WrongShape)
}
