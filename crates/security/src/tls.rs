//! TLS: a queue manager's key repository (PEM certificate, key and trusted CAs named in qm.ini's
//! SSL stanza), the rustls server and client configurations built from it, distinguished-name
//! filters (SSLPEER, SSLPEERMAP), and a development certificate authority that issues a queue
//! manager's and a client's certificates so that tests and the README need nothing from outside.
