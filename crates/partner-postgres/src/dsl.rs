//! Pieces the diesel DSL lacks, written so that a statement using them stays cacheable (prepared
//! once per connection, like the rest of the DSL): `dsl::sql` would mark it "do not cache".

use std::marker::PhantomData;

use diesel::expression::{AppearsOnTable, Expression, SelectableExpression, ValidGrouping};
use diesel::pg::Pg;
use diesel::query_builder::{AstPass, QueryFragment, QueryId};
use diesel::sql_types::{Bool, Nullable, SingleValue, SqlType};
use diesel::{QueryResult, define_sql_function};

/// SQL text the code fixes, as an expression of type `ST`. For the conditions a partial index is
/// declared with (`status = 'pending'`, `event = 'order_completed'`): written as a literal, the
/// prepared statement's generic plan can use that index; a bind parameter would leave PostgreSQL
/// planning the statement on every execution.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Fixed<ST>(&'static str, PhantomData<ST>);

/// `sql`, which must be a constant of the code (never built from input), typed `ST`.
pub(crate) const fn fixed<ST>(sql: &'static str) -> Fixed<ST> {
    Fixed(sql, PhantomData)
}

impl<ST: SqlType + diesel::expression::TypedExpressionType> Expression for Fixed<ST> {
    type SqlType = ST;
}

impl<ST, G> ValidGrouping<G> for Fixed<ST> {
    type IsAggregate = diesel::expression::is_aggregate::Never;
}

impl<ST, QS> AppearsOnTable<QS> for Fixed<ST> where Self: Expression {}

impl<ST, QS> SelectableExpression<QS> for Fixed<ST> where Self: AppearsOnTable<QS> {}

impl<ST> QueryId for Fixed<ST> {
    type QueryId = ();
    // Keyed by the rendered SQL: two fragments of one type render differently.
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<ST> QueryFragment<Pg> for Fixed<ST> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql(self.0);
        Ok(())
    }
}

/// `(l1, l2, …) < (r1, r2, …)`: a keyset condition as one row comparison, which PostgreSQL
/// matches to an index in that order. Both sides are tuples of expressions.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RowLt<L, R>(pub(crate) L, pub(crate) R);

impl<L, R> Expression for RowLt<L, R> {
    type SqlType = Bool;
}

impl<L, R> ValidGrouping<()> for RowLt<L, R> {
    type IsAggregate = diesel::expression::is_aggregate::Never;
}

impl<L: AppearsOnTable<QS>, R: AppearsOnTable<QS>, QS> AppearsOnTable<QS> for RowLt<L, R> {}

impl<L, R> QueryId for RowLt<L, R> {
    type QueryId = ();
    const HAS_STATIC_QUERY_ID: bool = false;
}

impl<L: QueryFragment<Pg>, R: QueryFragment<Pg>> QueryFragment<Pg> for RowLt<L, R> {
    fn walk_ast<'b>(&'b self, mut out: AstPass<'_, 'b, Pg>) -> QueryResult<()> {
        out.push_sql("(");
        self.0.walk_ast(out.reborrow())?;
        out.push_sql(") < (");
        self.1.walk_ast(out.reborrow())?;
        out.push_sql(")");
        Ok(())
    }
}

define_sql_function! {
    /// `COALESCE(x, y)`: `x` unless it is NULL.
    fn coalesce<T: SqlType + SingleValue>(x: Nullable<T>, y: T) -> T;
}

#[cfg(test)]
mod tests {
    use diesel::prelude::*;
    use diesel::query_builder::QueryFragment;
    use diesel::sql_types::Timestamptz;

    use super::*;
    use crate::schema::webhook_deliveries as d;

    #[test]
    fn fixed_text_and_row_comparisons_render_as_written_and_leave_the_statement_cacheable() {
        let at = time::macros::datetime!(2026-11-23 12:00 UTC);
        let q = d::table
            .filter(fixed::<Bool>("webhook_deliveries.status = 'pending'"))
            .filter(RowLt(
                (d::created_at, d::id),
                (
                    at.into_sql::<Timestamptz>(),
                    uuid::Uuid::nil().into_sql::<diesel::sql_types::Uuid>(),
                ),
            ))
            .select(d::id);
        let sql = diesel::debug_query::<Pg, _>(&q).to_string();
        assert!(
            sql.contains("webhook_deliveries.status = 'pending'"),
            "{sql}"
        );
        assert!(
            sql.contains(
                r#"("webhook_deliveries"."created_at", "webhook_deliveries"."id") < ($1, $2)"#
            ),
            "{sql}"
        );
        assert!(QueryFragment::<Pg>::is_safe_to_cache_prepared(&q, &Pg).expect("renders"));
    }
}
