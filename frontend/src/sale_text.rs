//! What the page says when a room's sale ends or closes (docs/DESIGN.md "Stock and sold out"),
//! in English and Korean, and the room's own sold-out message in the page's language.

use vestibule_shared::SoldOutMessage;

use crate::i18n::Lang;

/// A string of the sold-out and closed views.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SaleText {
    /// Headline of a SOLD_OUT ticket or a join refused with `sold_out`.
    SoldOut,
    /// Its explanation when the room has no message of its own in the page's language.
    SoldOutDetail,
    /// Headline of a join refused with `room_closed`.
    Closed,
    /// Its explanation.
    ClosedDetail,
}

/// The string `text` in `lang`.
pub fn sale_text(lang: Lang, text: SaleText) -> &'static str {
    let (en, ko) = match text {
        SaleText::SoldOut => ("Sold out", "품절되었습니다"),
        SaleText::SoldOutDetail => (
            "Everything on sale here has been sold. Thank you for waiting.",
            "준비된 상품이 모두 판매되었습니다. 기다려 주셔서 감사합니다.",
        ),
        SaleText::Closed => ("The line is closed", "대기열이 마감되었습니다"),
        SaleText::ClosedDetail => (
            "This waiting room takes no new shoppers. Those already in line keep their places.",
            "이 대기실은 더 이상 새로 줄을 서실 수 없습니다. 이미 줄을 선 분들의 순번은 유지됩니다.",
        ),
    };
    match lang {
        Lang::En => en,
        Lang::Ko => ko,
    }
}

/// The room's sold-out message in `lang`, else the page's own explanation.
pub fn sold_out_detail(lang: Lang, message: Option<&SoldOutMessage>) -> String {
    let own = message.and_then(|message| match lang {
        Lang::En => message.en.clone(),
        Lang::Ko => message.ko.clone(),
    });
    own.unwrap_or_else(|| sale_text(lang, SaleText::SoldOutDetail).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rooms_message_wins_in_its_language_only() {
        let message = SoldOutMessage {
            en: Some("All 100 pairs are gone.".into()),
            ko: None,
        };
        assert_eq!(
            sold_out_detail(Lang::En, Some(&message)),
            "All 100 pairs are gone."
        );
        assert_eq!(
            sold_out_detail(Lang::Ko, Some(&message)),
            sale_text(Lang::Ko, SaleText::SoldOutDetail)
        );
        assert_eq!(
            sold_out_detail(Lang::En, None),
            sale_text(Lang::En, SaleText::SoldOutDetail)
        );
    }
}
