//! Channel authentication rules (CHLAUTH): matching a connection attempt — channel name, remote
//! address, asserted client user, certificate DN, remote queue manager — against the stored rules
//! (generic channel profiles, address patterns and ranges), MQ's precedence between them, and the
//! decision: refuse (BLOCKADDR, BLOCKUSER, USERSRC(NOACCESS)), map to an MCA user (USERSRC(MAP)),
//! or take the channel's own (USERSRC(CHANNEL)). Also answers DISPLAY CHLAUTH MATCH(RUNCHECK).
