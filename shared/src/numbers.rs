//! Fields of JSON bodies that need more than serde's defaults (`deserialize_with`): whole numbers
//! written either way JSON allows, and `null` meaning "clear it".

use serde::Deserialize;

/// A whole number written either way JSON allows (`3` or `3.0`): JSON Schema's `integer` accepts
/// both, so a client that sends `3.0` must not be refused.
pub(crate) fn whole_number<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<u64>,
{
    let Some(number) = Option::<f64>::deserialize(deserializer)? else {
        return Ok(None);
    };
    if !(number.is_finite() && number >= 0.0 && number.fract() == 0.0 && number < 1.8e19) {
        return Err(serde::de::Error::custom(format!(
            "expected a whole number ≥ 0, got {number}"
        )));
    }
    T::try_from(number as u64)
        .map(Some)
        .map_err(|_| serde::de::Error::custom(format!("{number} is too large")))
}

/// [`whole_number`] for a required field.
pub(crate) fn required_whole_number<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<u64>,
{
    whole_number(deserializer)?.ok_or_else(|| serde::de::Error::custom("expected a whole number"))
}

/// [`whole_number`] for a field where `null` means "clear it" (`Some(None)`).
pub(crate) fn nullable_whole_number<'de, D, T>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: TryFrom<u64>,
{
    whole_number(deserializer).map(Some)
}

/// A field where `null` means "clear it" (`Some(None)`) and absence "unchanged" (`None`).
pub(crate) fn nullable<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}
