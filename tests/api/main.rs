//! Integration tests: the real server on port 0 against a fresh database of the real
//! PostgreSQL, driven over HTTP. One binary, one module per area.

#![allow(clippy::expect_used, clippy::indexing_slicing)]

mod database;
mod helpers;

mod auth;
mod browser;
mod contract;
mod coupons;
mod delivery_engine;
mod errors;
mod hostile;
mod leads;
mod links;
mod one_trip;
mod openapi;
mod operate;
mod operator;
mod orders;
mod receiver;
mod startup;
mod sub_accounts;
mod webhook_control;
mod webhooks;
