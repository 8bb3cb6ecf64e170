//! Every limit of the system in one place, named with its unit last. A limit that a user can change
//! (MAXMSGL, MAXDEPTH, `-h`) has its default and its hard ceiling here.

/// Largest message body any queue manager accepts (MQ's 100 MB ceiling for MAXMSGL).
pub const MSG_LEN_MAX_BYTES: u32 = 104_857_600;
/// Default MAXMSGL of the queue manager and its default objects (MQ's default is 4 MB).
pub const MSG_LEN_DEFAULT_BYTES: u32 = 4_194_304;
/// Default MAXDEPTH of a local queue.
pub const QUEUE_DEPTH_DEFAULT: u32 = 5000;
/// Largest MAXDEPTH accepted.
pub const QUEUE_DEPTH_MAX: u32 = 999_999_999;
/// Object names (queues, channels) are at most 48 characters, as in MQ.
pub const OBJECT_NAME_LEN_MAX: usize = 48;
/// Largest MQSC file the queue manager applies from its AutoConfig directory at start.
pub const AUTOCONFIG_FILE_BYTES_MAX: u64 = 16 << 20;
/// Queue manager names are at most 48 characters.
pub const QMGR_NAME_LEN_MAX: usize = 48;
/// Upper bound on one frame beyond the message body: descriptor, properties, names.
pub const FRAME_OVERHEAD_MAX_BYTES: u32 = 1_048_576;
/// Default number of open handles per connection (`crtmqm -h`).
pub const HANDLES_PER_CONN_DEFAULT: u32 = 256;
/// Default conversations sharing one socket (SHARECNV).
pub const SHARECNV_DEFAULT: u16 = 10;
/// Most conversations on one socket.
pub const SHARECNV_MAX: u16 = 999;
/// Default heartbeat interval negotiated on a connection: MQ's SVRCONN default HBINT (300 s),
/// so that tens of thousands of idle connections cost no measurable CPU.
pub const HEARTBEAT_DEFAULT_MS: u32 = 300_000;
/// Replies queued for one socket above which the queue manager reads no more of that socket's
/// requests until its client takes them (back pressure); a quarter of `Channels:MaxConnMemory` if
/// that is less.
pub const CONN_OUTBOUND_PAUSE_BYTES: u64 = 1 << 20;
/// Asynchronous puts (MQPMO_ASYNC_RESPONSE) a client socket holds queued but not yet written:
/// beyond this a further one waits for the writer, so a program putting faster than the socket
/// drains is held back by TCP back pressure instead of growing the client's memory.
pub const CLIENT_ASYNC_PUT_BACKLOG_BYTES: u64 = 1 << 20;
/// Default cap on what one socket may hold queued for its client (qm.ini
/// `Channels:MaxConnMemory`): a socket whose queued replies pass it, in more than one frame, is
/// closed and its units of work backed out. Reading stops long before (at
/// [`CONN_OUTBOUND_PAUSE_BYTES`]); only deliveries pushed to its waiting gets can pass it.
pub const CONN_MEMORY_DEFAULT_BYTES: u64 = 64 << 20;
/// The smallest `Channels:MaxConnMemory` accepted: room for a few replies.
pub const CONN_MEMORY_MIN_BYTES: u64 = 64 << 10;

/// The largest `TuningParameters:CpuWakeLatencyUs` accepted: beyond a few milliseconds the
/// request changes nothing a round trip would notice.
pub const CPU_WAKE_LATENCY_MAX_US: u32 = 10_000;

/// Worker threads of a queue manager's I/O runtime (qm.ini `TuningParameters:IoThreads`): the
/// default, and the most it takes (the engine is one lock: past two, threads mostly wait for it).
pub const IO_THREADS_DEFAULT: usize = 2;
pub const IO_THREADS_MAX: usize = 16;
/// A frame larger than this is read into an allocation of exactly its own size (smaller ones
/// share the socket's read buffer, whose reads are at most this size).
pub const FRAME_OWN_BUFFER_MIN_BYTES: usize = 64 << 10;
/// Message bodies up to this size are copied out of the buffer they arrived in when queued, so
/// that a queued message holds its own bytes and not a whole read buffer or segment. A larger
/// body came in a frame larger than [`FRAME_OWN_BUFFER_MIN_BYTES`], which has an allocation of
/// its own, and is kept as it is when it is most of that frame.
pub const BODY_COPY_MAX_BYTES: usize = FRAME_OWN_BUFFER_MIN_BYTES;
/// Most uncommitted messages in one unit of work (MAXUMSGS default).
pub const UOW_MSGS_MAX: u32 = 10_000;
/// Longest wait a get may ask for (MQWI_UNLIMITED is -1 on the wire; this bounds finite ones).
pub const GET_WAIT_MAX_MS: u64 = 24 * 3600 * 1000;
/// Properties attached to one message.
pub const PROPERTIES_PER_MSG_MAX: usize = 256;
/// Largest message sequence number (the queue manager's put counter, from 1): a queue's delivery
/// key packs it into 60 bits. Far beyond any real counter (a billion puts a second for 36 years),
/// so a record or image that holds a larger one is damaged.
pub const MSG_SEQ_MAX: u64 = (1 << 60) - 1;

/// Default of qm.ini `Channels:MaxChannels`, the client channels served at once. MQ's own
/// default (100) is far below what one queue manager holds; the open-file limit is the usual
/// bound, and the queue manager warns at start when it is below this.
pub const MAX_CHANNELS_DEFAULT: usize = 100_000;
/// The accept backlog of a TCP listener (the kernel caps it at net.core.somaxconn).
pub const LISTEN_BACKLOG: u32 = 4096;
/// How long the accept loop waits after running out of file descriptors (EMFILE, ENFILE)
/// before it accepts again, so that it never spins on a listener it cannot serve.
pub const ACCEPT_BACKOFF_MS: u64 = 75;
/// Refused client sockets being told why (2537) at once; past this a refused socket is closed
/// without a reason, so a flood of refusals cannot itself exhaust the descriptors.
pub const REFUSALS_IN_FLIGHT_MAX: usize = 256;
/// How long a refused socket is kept open to deliver its reason before it is closed.
pub const REFUSAL_LINGER_MS: u64 = 1_000;
/// Refused connections are logged at most once per this interval, with how many were refused.
pub const REFUSAL_LOG_INTERVAL_MS: u64 = 1_000;
/// Descriptors the queue manager keeps for itself (log files, listeners, the bindings socket,
/// metrics) beyond one per client channel, when it compares the open-file limit with MaxChannels.
pub const FDS_RESERVED: u64 = 64;

/// Bindings-mode (local) connections served at once. Counted apart from client channels
/// (qm.ini Channels:MaxChannels), as in MQ, so local administration and `strmqm`'s readiness
/// probe are never refused for want of a channel, and clients cannot lock out local work.
pub const BINDINGS_CONNECTIONS_MAX: usize = 100_000;
/// Longest string (name, property value) in the codec.
pub const STRING_LEN_MAX_BYTES: usize = 65_535;
/// Default circular log: primary files and pages per file (4 KiB pages), MQ's defaults.
pub const LOG_PRIMARY_FILES_DEFAULT: u32 = 3;
pub const LOG_FILE_PAGES_DEFAULT: u32 = 4096;
/// A checkpoint is taken when this fraction (percent) of the log is in use.
pub const LOG_CHECKPOINT_TRIGGER_PCT: u64 = 40;
/// Past this fraction (percent) of the log in use, a socket holds its next batch of requests
/// until a checkpoint has made room (TCP then slows its client), rather than letting a burst
/// fill the log and be refused with 2102 while a checkpoint is merely behind.
pub const LOG_ROOM_WAIT_PCT: u64 = 75;
/// The longest one batch waits for room in the log; then it runs (and is refused as before if
/// the log is full).
pub const LOG_ROOM_WAIT_MS: u64 = 2_000;
/// After a wait that ran out, how long sockets stop waiting for room (the log is held full by
/// something a checkpoint cannot free).
pub const LOG_ROOM_WAIT_OFF_MS: u64 = 10_000;
/// The descriptor's context fields, in characters, as MQ sizes them: UserIdentifier,
/// ApplIdentityData and PutApplName. Longer values are cut to fit.
pub const USER_ID_LEN_MAX: usize = 12;
pub const APPL_IDENTITY_LEN_MAX: usize = 32;
pub const PUT_APPL_NAME_LEN_MAX: usize = 28;

/// Longest user or group name the queue manager's user store holds (MQ's 64-character MCAUSER).
pub const USER_NAME_LEN_MAX: usize = 64;
/// Most users the queue manager's user store holds.
pub const USER_STORE_USERS_MAX: usize = 10_000;
/// Most groups one user of the store belongs to.
pub const USER_GROUPS_MAX: usize = 64;
/// Largest user store file read or written.
pub const USER_STORE_FILE_MAX_BYTES: u64 = 4 << 20;
/// Longest password accepted (longer ones are refused before hashing, so that a client cannot
/// make the queue manager hash megabytes).
pub const PASSWORD_LEN_MAX_BYTES: usize = 256;
/// Failed authentications from one address within [`AUTH_FAILURE_WINDOW_MS`] after which further
/// attempts from it are delayed by the AUTHINFO's FAILDLAY and refused without a password check.
pub const AUTH_FAILURES_PER_WINDOW_MAX: u32 = 5;
/// The window over which failed authentications are counted per address.
pub const AUTH_FAILURE_WINDOW_MS: u64 = 60_000;
/// Addresses whose failures are remembered at once (the oldest are forgotten first).
pub const AUTH_FAILURE_ADDRESSES_MAX: usize = 4096;
/// How long a successful password verification is remembered (see
/// `ferrymq_security::users::cache`): a reconnect within it costs no argon2 verification.
pub const AUTH_CACHE_TTL_MS: u64 = 300_000;
/// TLS client configurations a process keeps for reuse (one per distinct set of TLS options).
pub const TLS_CLIENT_CONFIGS_MAX: usize = 16;
/// Users whose last successful verification is remembered at once.
pub const AUTH_CACHE_USERS_MAX: usize = 4096;
/// Password verifications (argon2: tens of milliseconds of a core and ~19 MiB each) run at
/// once; more Connects wait their turn, so a storm of them can neither starve message traffic
/// of CPU nor take memory without bound.
pub const AUTH_VERIFY_CONCURRENT_MAX: usize = 2;
/// Longest a TLS handshake on a link between a queue manager's instances (HA replication, the DR
/// stream) may take before the connection is dropped and retried.
pub const LINK_TLS_HANDSHAKE_MS: u64 = 5_000;
/// A refusal of an instance link is written to the error log at most this often for one peer
/// and rule (the link retries every few hundred milliseconds meanwhile).
pub const LINK_REFUSAL_LOG_INTERVAL_MS: u64 = 60_000;
/// Peers whose last link refusal is remembered for that purpose (the oldest are forgotten).
pub const LINK_REFUSAL_PEERS_MAX: usize = 256;

/// The longest topic string (MQ's MQ_TOPIC_STR_LENGTH).
pub const TOPIC_STRING_LEN_MAX: usize = 10_240;
/// The most levels a topic string has (a publication's, or a subscription's pattern): bounds
/// the depth of the subscription index and of its walk per publication.
pub const TOPIC_LEVELS_MAX: usize = 256;
/// The longest subscription name (MQ's MQ_SUB_NAME_LENGTH).
pub const SUB_NAME_LEN_MAX: usize = 10_240;
/// The longest message selector (MQ's MQ_SELECTOR_LENGTH).
pub const SELECTOR_LEN_MAX_BYTES: usize = 10_240;
/// Subscriptions a queue manager holds, durable and non-durable together.
pub const SUBS_MAX: usize = 100_000;
/// Topic strings whose resolved attributes (ASPARENT up the tree) the queue manager keeps
/// between publications; past this it forgets them all and resolves again.
pub const TOPIC_ATTRS_CACHED_MAX: usize = 10_000;
/// How deeply a selector's expressions may nest (bounds the parser's recursion).
pub const SELECTOR_DEPTH_MAX: usize = 64;

/// Managed file transfer: the largest chunk an agent sends in one message (agentChunkSize).
pub const FTE_CHUNK_SIZE_MAX_BYTES: usize = 4 * 1024 * 1024;
/// Chunks a sending agent keeps unacknowledged at most, whatever window × frame says.
pub const FTE_OUTSTANDING_CHUNKS_MAX: usize = 1_000;
/// The longest file path a transfer request may name (source or destination).
pub const FTE_FILE_NAME_LEN_MAX: usize = 4_096;
/// Files one transfer request may move (after directories and wildcards are expanded).
pub const FTE_FILES_PER_TRANSFER_MAX: usize = 10_000;
/// Threads of a receiving agent that sync, check and rename the files whose data all arrived
/// (their syncs overlap; the queue to them holds as many files).
pub const FTE_FINISHERS: usize = 4;
/// Transfers an agent receives at once.
pub const FTE_RECEIVING_TRANSFERS_MAX: usize = 1_000;
/// Messages the queue manager pushes to a receiving agent ahead of the one it is handling (its
/// data queue's consumer window): at most this many chunks wait in the agent's socket buffers.
pub const FTE_RECEIVE_AHEAD_MSGS: u32 = 8;
/// Jobs (chunks to write, frames, ended files) queued to a receiving agent's checkpointer, and
/// taken by it as one batch at most (one sync per file, one unit of work): at most this many
/// chunks (of up to FTE_CHUNK_SIZE_MAX_BYTES) wait in memory to be written.
pub const FTE_CHECKPOINT_BATCH_MAX: usize = 64;
/// Transfer requests an agent's command queue holds (its MAXDEPTH) while they wait for one of
/// the maxSourceTransfers places.
pub const FTE_QUEUED_REQUESTS_MAX: u32 = 100_000;
/// The largest transfer request message an agent reads.
pub const FTE_REQUEST_LEN_MAX_BYTES: usize = 1024 * 1024;
/// How long a sending agent waits for an acknowledgement of its window (or an answer to a
/// resume) before it resumes the transfer from the receiver's last checkpoint.
pub const FTE_STALL_MS: u64 = 4_000;
/// How often an agent's monitor thread looks whether a monitor is due (the shortest poll).
pub const FTE_MONITOR_POLL_MIN_MS: u64 = 100;
/// Candidate files a monitor follows at once (the others wait for a later poll).
pub const FTE_MONITOR_FILES_MAX: usize = 100_000;
/// Files a monitor remembers as fired while they stay in its directory unchanged (past it, new
/// files wait until fired ones leave the directory).
pub const FTE_MONITOR_FIRED_MAX: usize = 100_000;
/// Messages a queue monitor takes from its queue in one poll.
pub const FTE_MONITOR_MSGS_PER_POLL_MAX: usize = 1_000;
/// How often at most a sending agent publishes a progress event of a transfer.
pub const FTE_PROGRESS_INTERVAL_MS: u64 = 1_000;
/// How long an agent that lost its queue manager keeps trying to reconnect before it ends.
pub const FTE_RECONNECT_WAIT_MS: u64 = 600_000;
/// How long fteStartAgent waits for the agent it spawned to be ready.
pub const FTE_AGENT_START_WAIT_MS: u64 = 30_000;
/// How long a starting agent waits for its exclusive queues (command, data) to be released by
/// a predecessor that was killed and whose connection its queue manager has not yet cleared.
pub const FTE_EXCLUSIVE_OPEN_WAIT_MS: u64 = 10_000;

/// The largest heartbeat interval (HBINT) and disconnect interval (DISCINT) of a channel, in
/// seconds, and the largest BATCHLIM, in kilobytes, as MQ accepts them.
pub const CHANNEL_HB_INT_MAX_S: u64 = 999_999;
pub const CHANNEL_DISC_INT_MAX_S: u64 = 999_999;
pub const CHANNEL_BATCH_LIM_MAX_KB: u64 = 999_999;
/// The most message retries (MRRTY) and the longest wait between two (MRTMR, ms) of a
/// receiving channel, as MQ accepts them.
pub const CHANNEL_MSG_RETRIES_MAX: u64 = 999_999_999;
pub const CHANNEL_MSG_RETRY_WAIT_MAX_MS: u64 = 999_999_999;
