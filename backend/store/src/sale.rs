//! A room's sale as the store keeps it with its settings: stock, units sold, the sold-out mark,
//! closing and the sold-out message (docs/DESIGN.md "Stock and sold out"). The admin API's view is
//! the matching fields of `vestibule_shared::RoomSettings`; bounds in `vestibule_shared::settings`.

/// Stock, sold out and closing. Stored with the settings (Redis: the document's fields `stock`,
/// `sold`, `soldout` and `closed`, which scripts read and orders change), but changed by orders
/// too: an order's store step takes a unit from `stock` and adds one to `sold` without moving
/// the settings' version.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SaleSettings {
    /// Units left; `None` = unlimited.
    #[serde(default)]
    pub stock: Option<u64>,
    /// Units sold by orders.
    #[serde(default)]
    pub sold: u64,
    /// The sold-out mark: set by an operator, by a stock of 0, or by the order that took the
    /// last unit. Never cleared (SOLD_OUT tickets are final).
    #[serde(default)]
    pub sold_out: bool,
    /// Closed to new joins.
    #[serde(default)]
    pub closed: bool,
    /// The English sold-out message; `None` = the page's own.
    #[serde(default)]
    pub message_en: Option<String>,
    /// The Korean sold-out message; `None` = the page's own.
    #[serde(default)]
    pub message_ko: Option<String>,
}

/// A partial change of [`SaleSettings`]; `None` fields stay as they are (`sold` is never set).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SalePatch {
    /// New units left: `Some(None)` = unlimited.
    pub stock: Option<Option<u64>>,
    /// `Some(true)` marks the room sold out; `Some(false)` never clears the mark.
    pub sold_out: Option<bool>,
    /// Close or reopen to new joins.
    pub closed: Option<bool>,
    /// New English message: `Some(None)` = the page's own.
    pub message_en: Option<Option<String>>,
    /// New Korean message.
    pub message_ko: Option<Option<String>>,
}

/// Why a join was refused because of the room's sale (nothing changed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JoinRefusal {
    /// The room is sold out (409 `sold_out`).
    SoldOut,
    /// The room is closed to new joins (409 `room_closed`).
    Closed,
}

impl SaleSettings {
    /// These values with `patch` applied. The sold-out mark stays once set, and a stock of 0
    /// sets it.
    pub fn patched(&self, patch: &SalePatch) -> Self {
        let stock = patch.stock.unwrap_or(self.stock);
        Self {
            stock,
            sold: self.sold,
            sold_out: self.sold_out || patch.sold_out == Some(true) || stock == Some(0),
            closed: patch.closed.unwrap_or(self.closed),
            message_en: patch
                .message_en
                .clone()
                .unwrap_or_else(|| self.message_en.clone()),
            message_ko: patch
                .message_ko
                .clone()
                .unwrap_or_else(|| self.message_ko.clone()),
        }
    }

    /// Why a join that would make a new ticket is refused now, if it is (sold out first).
    pub fn join_refusal(&self) -> Option<JoinRefusal> {
        if self.sold_out {
            Some(JoinRefusal::SoldOut)
        } else if self.closed {
            Some(JoinRefusal::Closed)
        } else {
            None
        }
    }

    /// Most active users admission may leave: the stock left (a shopper admitted beyond it could
    /// not buy); `None` = no limit from stock.
    pub fn admission_cap(&self) -> Option<u64> {
        if self.sold_out {
            Some(0)
        } else {
            self.stock
        }
    }

    /// Takes one unit for an order: `false` (nothing changed) when none is left; else `sold`
    /// grows and the last unit sets the sold-out mark.
    pub fn take_unit(&mut self) -> bool {
        match self.stock {
            Some(0) => false,
            Some(left) => {
                self.stock = Some(left - 1);
                self.sold += 1;
                self.sold_out |= left == 1;
                true
            }
            None => {
                self.sold += 1;
                true
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_unit_sells_out_and_the_mark_stays() {
        let mut sale = SaleSettings {
            stock: Some(2),
            ..SaleSettings::default()
        };
        assert!(sale.take_unit() && !sale.sold_out);
        assert!(sale.take_unit() && sale.sold_out);
        assert!(!sale.take_unit());
        assert_eq!((sale.stock, sale.sold), (Some(0), 2));
        let reopened = sale.patched(&SalePatch {
            sold_out: Some(false),
            stock: Some(Some(5)),
            ..SalePatch::default()
        });
        assert!(reopened.sold_out, "the mark is final");
        assert_eq!(reopened.join_refusal(), Some(JoinRefusal::SoldOut));
        let zero = SaleSettings::default().patched(&SalePatch {
            stock: Some(Some(0)),
            ..SalePatch::default()
        });
        assert!(zero.sold_out && zero.admission_cap() == Some(0));
        let closed = SaleSettings::default().patched(&SalePatch {
            closed: Some(true),
            ..SalePatch::default()
        });
        assert_eq!(closed.join_refusal(), Some(JoinRefusal::Closed));
        let mut unlimited = SaleSettings::default();
        assert!(unlimited.take_unit() && unlimited.sold == 1 && !unlimited.sold_out);
    }
}
