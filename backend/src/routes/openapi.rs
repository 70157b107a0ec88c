//! `GET /api/v1/openapi.json`: the OpenAPI 3.1 document, generated from the handlers and DTOs.

use axum::routing::get;
use axum::Router;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::error::Json;
use crate::state::AppState;

struct AdminSecurity;

impl Modify for AdminSecurity {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "admin_token",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// The API description.
#[derive(OpenApi)]
#[openapi(
    info(title = "Vestibule API", version = "1", description = "Virtual waiting room: join a room's queue, poll or stream your position, check out with an entry token."),
    paths(
        super::tickets::join, super::tickets::poll, super::tickets::leave,
        super::events::events, super::rooms::room_info, super::orders::place_order,
        super::admin::settings, super::admin::update,
        super::health::healthz, super::health::readyz, super::health::metrics_text,
    ),
    components(schemas(
        vestibule_shared::TicketStatus, vestibule_shared::TicketState, vestibule_shared::RoomInfo,
        vestibule_shared::RoomState, vestibule_shared::RoomSettings, vestibule_shared::RoomSettingsPatch,
        vestibule_shared::OrderRequest, vestibule_shared::OrderReceipt, vestibule_shared::ErrorBody,
    )),
    modifiers(&AdminSecurity)
)]
pub struct ApiDoc;

/// Routes of this module.
pub fn router() -> Router<AppState> {
    Router::new().route(
        "/api/v1/openapi.json",
        get(|| async { Json(ApiDoc::openapi()) }),
    )
}
