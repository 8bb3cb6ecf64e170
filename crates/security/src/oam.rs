//! Object authorities (MQ's OAM): authority records (profile, object type, principal or group,
//! authorities), generic profiles (`*`, `**`, `?`), the most specific profile per entity, the
//! union over a principal's groups, and the answer to "may this principal do this to this object",
//! with the record that granted it or the authorities that were missing.
