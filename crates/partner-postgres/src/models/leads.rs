//! `leads` rows.

use diesel::prelude::*;
use diesel::sql_types::{Bool, Int2, Nullable, Text, Timestamptz};
use partner_domain::RepoError;
use partner_domain::kernel::values::{PartnerId, SubId};
use partner_domain::lead::{Lead, LeadId, LeadParts, Origin, TestFlag, TestSource};
use time::OffsetDateTime;
use uuid::Uuid;

use crate::corrupt;
use crate::schema::leads;

/// A lead as pages, locks and webhook payloads read it; also the lead half of the leads
/// statement's rows (`LeadsForToken`, read by position).
#[derive(Queryable, QueryableByName, Selectable)]
#[diesel(table_name = leads, check_for_backend(diesel::pg::Pg))]
pub(crate) struct Row {
    #[diesel(sql_type = diesel::sql_types::Uuid)]
    id: Uuid,
    #[diesel(sql_type = Text)]
    partner_id: String,
    #[diesel(sql_type = Nullable<Int2>)]
    sub_id: Option<i16>,
    #[diesel(sql_type = Text)]
    first_name: String,
    #[diesel(sql_type = Text)]
    last_name: String,
    #[diesel(sql_type = Text)]
    email: String,
    #[diesel(sql_type = Bool)]
    email_consent: bool,
    #[diesel(sql_type = Nullable<Text>)]
    phone: Option<String>,
    #[diesel(sql_type = Bool)]
    sms_consent: bool,
    #[diesel(sql_type = Text)]
    origin: String,
    #[diesel(sql_type = Text)]
    location: String,
    #[diesel(sql_type = Nullable<Text>)]
    question_id: Option<String>,
    #[diesel(sql_type = Nullable<Text>)]
    test_source: Option<String>,
    #[diesel(sql_type = Timestamptz)]
    created_at: OffsetDateTime,
    #[diesel(sql_type = Timestamptz)]
    updated_at: OffsetDateTime,
}

pub(crate) fn sub_id(v: Option<i16>) -> Result<Option<SubId>, RepoError> {
    v.map(|n| {
        u16::try_from(n)
            .ok()
            .and_then(SubId::new)
            .ok_or_else(|| corrupt("sub id"))
    })
    .transpose()
}

impl Row {
    /// The lead beside a claimed delivery in the claim's row (`lead_*` columns, all null when the
    /// delivery is not about a lead or the lead is gone: `claim::CLAIM_SQL`).
    pub(crate) fn prefixed<'a>(
        row: &impl diesel::row::NamedRow<'a, diesel::pg::Pg>,
    ) -> diesel::deserialize::Result<Option<Self>> {
        use diesel::row::NamedRow as R;
        let Some(id) = R::get::<Nullable<diesel::sql_types::Uuid>, Option<Uuid>>(row, "lead_id")?
        else {
            return Ok(None);
        };
        Ok(Some(Self {
            id,
            partner_id: R::get::<Text, _>(row, "lead_partner_id")?,
            sub_id: R::get::<Nullable<Int2>, _>(row, "lead_sub_id")?,
            first_name: R::get::<Text, _>(row, "lead_first_name")?,
            last_name: R::get::<Text, _>(row, "lead_last_name")?,
            email: R::get::<Text, _>(row, "lead_email")?,
            email_consent: R::get::<Bool, _>(row, "lead_email_consent")?,
            phone: R::get::<Nullable<Text>, _>(row, "lead_phone")?,
            sms_consent: R::get::<Bool, _>(row, "lead_sms_consent")?,
            origin: R::get::<Text, _>(row, "lead_origin")?,
            location: R::get::<Text, _>(row, "lead_location")?,
            question_id: R::get::<Nullable<Text>, _>(row, "lead_question_id")?,
            test_source: R::get::<Nullable<Text>, _>(row, "lead_test_source")?,
            created_at: R::get::<Timestamptz, _>(row, "lead_created_at")?,
            updated_at: R::get::<Timestamptz, _>(row, "lead_updated_at")?,
        }))
    }

    /// The row's id, readable whatever its other columns hold.
    pub(crate) fn id(&self) -> Uuid {
        self.id
    }

    pub(crate) fn into_domain(self) -> Result<Lead, RepoError> {
        let origin = Origin::parse(&self.origin).map_err(|_| corrupt("origin"))?;
        let source = self
            .test_source
            .as_deref()
            .map(|s| TestSource::parse(s).ok_or_else(|| corrupt("test source")))
            .transpose()?;
        let test = TestFlag::from_stored(source, &origin).map_err(|_| corrupt("test flag"))?;
        Lead::new(LeadParts {
            id: LeadId::from_uuid(self.id),
            partner_id: PartnerId::parse(&self.partner_id).map_err(|_| corrupt("partner id"))?,
            sub_id: sub_id(self.sub_id)?,
            first_name: self.first_name,
            last_name: self.last_name,
            email: self.email,
            email_consent: self.email_consent,
            phone: self.phone,
            sms_consent: self.sms_consent,
            origin,
            location: self.location,
            question_id: self.question_id,
            test,
            created_at: self.created_at,
            updated_at: self.updated_at,
        })
        .map_err(|_| corrupt("lead"))
    }
}

/// What a patch may change.
#[derive(AsChangeset)]
#[diesel(table_name = leads, treat_none_as_null = true)]
pub(crate) struct Changes<'a> {
    first_name: &'a str,
    last_name: &'a str,
    email: &'a str,
    email_consent: bool,
    phone: Option<&'a str>,
    sms_consent: bool,
    updated_at: OffsetDateTime,
}

impl<'a> Changes<'a> {
    pub(crate) fn of(lead: &'a Lead) -> Self {
        Self {
            first_name: lead.first_name(),
            last_name: lead.last_name(),
            email: lead.email(),
            email_consent: lead.email_consent(),
            phone: lead.phone(),
            sms_consent: lead.sms_consent(),
            updated_at: lead.updated_at(),
        }
    }
}
