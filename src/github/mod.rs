//! The GitHub REST client: auth (PAT, App JWT), typed errors, rate limits, ETags, pagination.
