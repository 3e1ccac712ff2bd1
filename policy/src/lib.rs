//! sysward-policy
