//! `webhook_endpoints` rows.

use diesel::prelude::*;
use partner_domain::RepoError;
use partner_domain::events::EventKind;
use partner_domain::kernel::ids::EndpointId;
use partner_domain::kernel::values::PartnerId;
use partner_domain::webhook::{
    CustomHeader, DisabledReason, EndpointParts, LeadCreatedDelay, WebhookEndpoint, WebhookSecret,
};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::corrupt;
use crate::schema::webhook_endpoints;

/// An endpoint as partners and the worker read it.
#[derive(Queryable, Selectable)]
#[diesel(table_name = webhook_endpoints, check_for_backend(diesel::pg::Pg))]
pub(crate) struct EndpointRow {
    id: Uuid,
    partner_id: String,
    url: String,
    events: Vec<String>,
    lead_created_delay_seconds: Option<i32>,
    custom_header_name: Option<String>,
    custom_header_value: Option<String>,
    secret: Option<String>,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
    disabled_at: Option<OffsetDateTime>,
    disabled_reason: Option<String>,
    previous_secret: Option<String>,
    previous_secret_expires_at: Option<OffsetDateTime>,
}

pub(crate) fn delay_seconds(d: Option<LeadCreatedDelay>) -> Option<i32> {
    d.map(|d| i32::try_from(d.duration().whole_seconds()).unwrap_or(i32::MAX))
}

fn delay_from_seconds(s: Option<i32>) -> Result<Option<LeadCreatedDelay>, RepoError> {
    s.map(|s| match s {
        60 => Ok(LeadCreatedDelay::OneMinute),
        300 => Ok(LeadCreatedDelay::FiveMinutes),
        3600 => Ok(LeadCreatedDelay::OneHour),
        _ => Err(corrupt("lead.created delay")),
    })
    .transpose()
}

fn events(v: &[String]) -> Result<Vec<EventKind>, RepoError> {
    v.iter()
        .map(|e| EventKind::parse(e).ok_or_else(|| corrupt("event kind")))
        .collect()
}

pub(crate) fn header(
    name: Option<String>,
    value: Option<String>,
) -> Result<Option<CustomHeader>, RepoError> {
    match (name, value) {
        (Some(name), Some(value)) => CustomHeader::parse(&name, &value)
            .map(Some)
            .map_err(|_| corrupt("custom header")),
        _ => Ok(None),
    }
}

impl EndpointRow {
    pub(crate) fn into_domain(self) -> Result<WebhookEndpoint, RepoError> {
        let disabled_reason = self
            .disabled_reason
            .map(|r| DisabledReason::parse(&r).ok_or_else(|| corrupt("disabled reason")))
            .transpose()?;
        Ok(WebhookEndpoint::new(EndpointParts {
            id: EndpointId::from_uuid(self.id),
            partner_id: PartnerId::parse(&self.partner_id).map_err(|_| corrupt("partner id"))?,
            url: self.url,
            events: events(&self.events)?,
            lead_created_delay: delay_from_seconds(self.lead_created_delay_seconds)?,
            custom_header: header(self.custom_header_name, self.custom_header_value)?,
            secret: self.secret.map(WebhookSecret::from_stored),
            previous_secret: self
                .previous_secret
                .map(WebhookSecret::from_stored)
                .zip(self.previous_secret_expires_at),
            disabled: self.disabled_at.map(|at| (at, disabled_reason)),
            created_at: self.created_at,
            updated_at: self.updated_at,
        }))
    }
}

/// What a partner sets on an endpoint, written alike on create and update. `None` is written
/// as NULL (never `DEFAULT`), so each statement has one shape.
#[derive(Insertable, AsChangeset)]
#[diesel(
    table_name = webhook_endpoints,
    treat_none_as_default_value = false,
    treat_none_as_null = true
)]
pub(crate) struct Settings<'a> {
    url: &'a str,
    events: Vec<&'a str>,
    lead_created_delay_seconds: Option<i32>,
    custom_header_name: Option<&'a str>,
    custom_header_value: Option<&'a str>,
    secret: Option<&'a str>,
}

impl<'a> Settings<'a> {
    fn of(e: &'a WebhookEndpoint) -> Self {
        Self {
            url: e.url(),
            events: e.events().iter().map(|k| k.as_str()).collect(),
            lead_created_delay_seconds: delay_seconds(e.lead_created_delay()),
            custom_header_name: e.custom_header().map(CustomHeader::name),
            custom_header_value: e.custom_header().map(CustomHeader::value),
            secret: e.secret().as_ref().map(|s| s.expose()),
        }
    }
}

/// A new endpoint: enabled, with no previous secret.
#[derive(Insertable)]
#[diesel(table_name = webhook_endpoints)]
pub(crate) struct NewEndpoint<'a> {
    id: Uuid,
    partner_id: &'a str,
    #[diesel(embed)]
    settings: Settings<'a>,
    created_at: OffsetDateTime,
    updated_at: OffsetDateTime,
}

impl<'a> NewEndpoint<'a> {
    pub(crate) fn new(e: &'a WebhookEndpoint) -> Self {
        Self {
            id: e.id().as_uuid(),
            partner_id: e.partner_id().as_str(),
            settings: Settings::of(e),
            created_at: e.created_at(),
            updated_at: e.created_at(),
        }
    }
}

/// What a partner's update writes (the health columns are the statement's).
#[derive(AsChangeset)]
#[diesel(table_name = webhook_endpoints, treat_none_as_null = true)]
pub(crate) struct Changes<'a> {
    #[diesel(embed)]
    settings: Settings<'a>,
    updated_at: OffsetDateTime,
    disabled_at: Option<OffsetDateTime>,
    disabled_reason: Option<&'static str>,
    previous_secret: Option<&'a str>,
    previous_secret_expires_at: Option<OffsetDateTime>,
}

impl<'a> Changes<'a> {
    pub(crate) fn of(e: &'a WebhookEndpoint) -> Self {
        Self {
            settings: Settings::of(e),
            updated_at: e.updated_at(),
            disabled_at: e.disabled_at(),
            disabled_reason: e.disabled_reason().map(DisabledReason::as_str),
            previous_secret: e.previous_secret().as_ref().map(|s| s.expose()),
            previous_secret_expires_at: e.previous_secret_expires_at(),
        }
    }
}
