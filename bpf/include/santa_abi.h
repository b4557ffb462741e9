/* SPDX-License-Identifier: (GPL-2.0 OR BSD-2-Clause) */
/*
 * The one definition of everything the data plane shares with user space:
 * limits, map keys and values, counter indices. Go types are generated from
 * this file by bpf2go (-type); they are never written twice by hand.
 *
 * Byte order: the data plane runs little-endian (bpfel). Checksum partial sums
 * (reply_csum) are sums of 16-bit words loaded in that native order, which is
 * how bpf_csum_diff and direct loads see them.
 */
#ifndef SANTA_ABI_H
#define SANTA_ABI_H

/*
 * What user space shares is an enum, not a #define: BTF carries enums, and
 * bpf2go emits them as Go constants (-type in internal/datapath/gen.go),
 * which a test there compares with the Go packages' own copies. A #define
 * is the data plane's alone.
 */

/* Limits (docs/rules.md). Every loop in the data plane is bounded by one.
 * Two can be set at build time (-DSANTA_MAX_REGIONS=...); the enum then
 * carries the built value to user space. */
#ifndef SANTA_MAX_REGIONS
#define SANTA_MAX_REGIONS 8 /* hashed regions per service */
#endif
#ifndef SANTA_MAX_DEPTH
#define SANTA_MAX_DEPTH 4 /* index levels below a region's root */
#endif

enum santa_limit {
	SANTA_LIMIT_MAX_REGIONS = SANTA_MAX_REGIONS,
	SANTA_LIMIT_MAX_DEPTH = SANTA_MAX_DEPTH,
	SANTA_MAX_REGION_LEN = 64,    /* bytes hashed for a root index lookup */
	SANTA_MAX_EXTEND_LEN = 64,    /* bytes hashed per deeper index level */
	SANTA_NODE_SLOTS = 4,         /* candidates kept in one index node */
	SANTA_MAX_COND_LEN = 256,     /* pattern length */
	SANTA_MAX_COND_END = 1024,    /* conditions and copy sources lie in the first 1024 payload bytes */
	SANTA_MAX_PROCESSORS = 8,     /* put/copy processors per rule */
	SANTA_MAX_COPIES = 8,         /* disjoint copy pieces after resolving processor order */
	SANTA_MAX_COPY_LEN = 256,     /* bytes one copy processor moves */
	SANTA_MAX_UDP_REPLY = 1472,   /* UDP payload of a 1500-byte IPv4 frame */
	SANTA_MAX_UDP_REQUEST = 1472, /* longer requests always pass to the stack */
	SANTA_MAX_TCP_REPLY = 65535,  /* the stack segments it; reply_len is 16 bits */
	SANTA_MAX_TCP_REQUEST = 1472, /* longer segments always pass to the application */
	SANTA_SCRATCH_LEN = 2048,     /* per-CPU copy of the request payload */
};

/* Load-time limits: the maps' sizes in the objects, which user space
 * sets before loading (its own defaults are these). */
enum santa_default_capacity {
	SANTA_DEFAULT_MAX_RULES = 1 << 20,
	SANTA_DEFAULT_MAX_SERVICES = 4096,
	SANTA_DEFAULT_MAX_CONNS = 65536, /* TCP connections under registered listeners */
	SANTA_DEFAULT_LEARN_ENTRIES = 1 << 18, /* keys counted by learning, every service together */
	SANTA_DEFAULT_LEARN_WATCH = 1 << 17,   /* keys user space reads the counts of */
};

/* Room for 16k close events (8-byte cookie + 8-byte ring header) between two
 * reads; user space also sweeps, so an overflow only delays a clean-up. */
#define SANTA_CLOSED_RING_BYTES (256u * 1024)

/* A hashed region of the L4 payload: [off, off + len). */
struct santa_region {
	__u16 off;
	__u16 len;
};

/* A registered socket, keyed by its socket cookie in the services map. */
struct santa_service {
	__u32 id;       /* dense: index into service_stats, owner of rules */
	__u32 index_id; /* generation of this service's index entries */
	__u8 nregions;
	__u8 proto;     /* IPPROTO_UDP (17) or IPPROTO_TCP (6) */
	__u8 parser;    /* enum santa_parser: how its requests are read for writes */
	__u8 pad;
	/* Learning (learn.h): 0 = off; else the id under which the passed
	 * requests are counted, never reused, so that a sample still in the
	 * ring when the service ends is not taken for another's. */
	__u32 learn;
	__u16 learn_off;   /* the key is payload[learn_off:] */
	__be16 probe_port; /* UDP source port of the manager's probes, never answered nor counted; 0: none */
	struct santa_region regions[SANTA_MAX_REGIONS];
	/* A memcached service's generation domain (santa_mc_domain): the
	 * service id whose generations its writes bump and its guards read. */
	__u32 mc_domain;
	/* A TCP listener's: the slot in conn_owners (tcp_maps.h) of the uid
	 * whose connection places its connections take. */
	__u32 conn_owner;
};

/*
 * One node of a service's index: candidates whose condition's bytes hash to
 * `hash` over payload[region.off, end). Roots have end = region.off + region.len.
 * Deeper nodes extend the same FNV-1a hash to a longer prefix, so conditions
 * sharing a long prefix (DNS names) spread over many nodes instead of piling
 * into one bucket.
 */
struct santa_index_key {
	__u32 index_id;
	__u32 hash;
	__u16 end;
	__u8 region;
	__u8 pad;
};

struct santa_index_node {
	/* Rule slots, most specific first (longest condition, then lowest id);
	 * SANTA_SLOT_NONE ends the list. Every condition here ends before
	 * next_end; every condition below is longer. */
	__u32 slots[SANTA_NODE_SLOTS];
	/* The rule id of slots[0], the likeliest to answer: its counters are
	 * read while the rule itself is on its way (match.h). */
	__u32 head_id;
	__u16 next_end; /* 0: leaf; else hash on to next_end and look up the child */
	__u16 pad;
};

/*
 * rule_index is an open-addressing table in a plain array (maps.h): an
 * entry lies at most SANTA_INDEX_PROBES - 1 positions past its home (linear
 * probing). A position whose index_id is 0 is free and ends a probe (index
 * ids start at 1); SANTA_INDEX_TOMB marks a deleted entry, which a probe
 * goes on past.
 */
enum santa_index_layout {
	SANTA_INDEX_PROBES = 64,
	SANTA_INDEX_TOMB = 0xffffffffu,
};

struct santa_index_entry {
	struct santa_index_key key;
	struct santa_index_node node;
};

/* Request bytes [src, src + len) go to reply bytes [dst, dst + len). */
struct santa_copy {
	__u16 src;
	__u16 dst;
	__u16 len;
	__u16 pad;
};

/*
 * A rule as matching sees it, stored under a slot number: the start of its
 * size class's body (below). A slot is written only while no index node
 * refers to it and reused only after an RCU grace period, so a reader always
 * sees one complete rule.
 */
struct santa_rule {
	__u32 rule_id;    /* stable across replace: index into rule_stats */
	__u32 service_id; /* a candidate of another service never answers */
	__u32 slot;       /* where it is stored: the reply is read from there */
	__u16 cond_off;
	__u16 cond_len;
	__u16 reply_len;
	__u8 ncopies;
	__u8 flags;       /* enum santa_rule_flag */
	/* Ones-complement partial sum of reply[0, reply_len) in native 16-bit
	 * words, with copy destinations zeroed: the reply's checksum is this
	 * plus the copied bytes, the UDP header and the pseudo header. */
	__u32 reply_csum;
	/* The request's payload length must be at least req_min and, unless
	 * req_max is 0, at most req_max: without them a condition is a prefix,
	 * and a request with bytes after it would match. */
	__u16 req_min;
	__u16 req_max;
	struct santa_copy copies[SANTA_MAX_COPIES];
	__u8 cond[SANTA_MAX_COND_LEN];
};

/*
 * Rule bodies come in three size classes by reply length, each in a map of
 * its own, so that a rule costs the memory and install time its reply
 * needs, not those of the largest reply. A slot's top bits name its class.
 * The UDP classes' bodies are whole cache lines (448, 960 and 1856 bytes):
 * in their arrays each body starts on a line of its own, so a match reads
 * no line of a neighbour.
 */
#define SANTA_SMALL_REPLY 100
#define SANTA_MEDIUM_REPLY 612

enum santa_rule_class {
	SANTA_RULE_SMALL = 0,
	SANTA_RULE_MEDIUM = 1,
	SANTA_RULE_LARGE = 2,
	SANTA_RULE_HUGE = 3, /* TCP replies beyond a UDP frame */
};

/* A slot's number and class; a UDP class's bodies come in chunks of
 * 1 << shift slots, about 2 MiB each. */
enum santa_slot_layout {
	SANTA_SLOT_NONE = 0, /* slot 0 of the rules map is never used: an empty candidate is 0 */
	SANTA_SLOT_CLASS_SHIFT = 30,
	SANTA_SMALL_CHUNK_SHIFT = 12,
	SANTA_MEDIUM_CHUNK_SHIFT = 11,
	SANTA_LARGE_CHUNK_SHIFT = 10,
};

/* Put processors applied in order; zero at copy destinations. */
struct santa_rule_small {
	struct santa_rule rule;
	__u8 reply[SANTA_SMALL_REPLY];
};

struct santa_rule_medium {
	struct santa_rule rule;
	__u8 reply[SANTA_MEDIUM_REPLY];
};

struct santa_rule_large {
	struct santa_rule rule;
	__u8 reply[SANTA_MAX_UDP_REPLY];
	__u8 pad[36];
};

/* A kernel allocation of 128 KiB: only TCP replies above SANTA_MAX_UDP_REPLY
 * come here. */
struct santa_rule_huge {
	struct santa_rule rule;
	__u8 reply[SANTA_MAX_TCP_REPLY];
};

_Static_assert(sizeof(struct santa_rule_small) % 64 == 0, "small rules are whole cache lines");
_Static_assert(sizeof(struct santa_rule_medium) % 64 == 0, "medium rules are whole cache lines");
_Static_assert(sizeof(struct santa_rule_large) % 64 == 0, "large rules are whole cache lines");
/* A body's reply starts right after its head, whatever its class: readers
 * find it there (maps.h, santa_rule_reply). */
_Static_assert(__builtin_offsetof(struct santa_rule_small, reply) == sizeof(struct santa_rule), "small reply after head");
_Static_assert(__builtin_offsetof(struct santa_rule_medium, reply) == sizeof(struct santa_rule), "medium reply after head");
_Static_assert(__builtin_offsetof(struct santa_rule_large, reply) == sizeof(struct santa_rule), "large reply after head");
_Static_assert(__builtin_offsetof(struct santa_rule_huge, reply) == sizeof(struct santa_rule), "huge reply after head");

/* Per-CPU, per-service packet counters (service_stats). */
enum santa_service_counter {
	SANTA_SVC_MATCHED = 0,  /* answered by the data plane, in XDP or in TC */
	SANTA_SVC_PASSED,       /* reached the stack: no rule matched, or a matched rule could not answer */
	SANTA_SVC_TC_CSUM,      /* answered in TC, not XDP: XDP could not verify the request's checksum (a partial one, without veth's skb to vouch for it) */
	SANTA_SVC_BAD_CSUM,     /* matched but the request checksum was wrong: passed */
	SANTA_SVC_TC_TOO_LONG,  /* answered in TC, not XDP: the reply did not fit the XDP frame */
	SANTA_SVC_TC_NO_XDP,    /* answered in TC, not XDP: no XDP program saw the request, or XDP could not send the reply (a veth whose peer has neither XDP nor GRO) */
	SANTA_SVC_NCOUNTERS,
};

struct santa_service_stats {
	__u64 packets[SANTA_SVC_NCOUNTERS];
};

/* Per-CPU, per-rule counters (rule_stats), indexed by rule_id. */
struct santa_rule_stats {
	__u64 hits;
	__u64 bytes; /* reply payload bytes sent */
};

/*
 * Learning (learn.h): a UDP service with learning on counts the requests it
 * passes (no rule answered) by their key, payload[learn_off:], exactly, by
 * the key's 64-bit hash (seeded, with the service's learn id and the key's
 * length). A key user space watches (a candidate) is counted in
 * learn_passes at the slot learn_watch gives it, which user space
 * reads once per window; any other in
 * learn_counts, an LRU hash, by window: when its count in a window reaches
 * the threshold, a sample with its bytes goes to the learn_samples ring
 * (at most budget per CPU and window), and user space makes it a
 * candidate.
 */
enum santa_learn_layout {
	SANTA_LEARN_MAX_KEY = 256,    /* longer keys are not counted */
	SANTA_LEARN_MAX_OFF = 1023,   /* the largest learn_off */
};

/* The one entry of learn_config, written by user space. */
struct santa_learn_config {
	__u32 window;    /* counts the windows: each CPU's budgets start anew in each */
	__u32 threshold; /* a key's passes in a window that bring a sample */
	__u32 budget;    /* samples per CPU and window */
	__u32 counts;    /* passed requests counted per CPU and window; those after are not */
};

/* A CPU's learning in the window it last learned in (learn_cpu, per CPU). */
struct santa_learn_cpu {
	__u32 window;
	__u32 samples; /* taken */
	__u32 passed;  /* requests of learning services passed */
	__u32 counted; /* of those, counted (at most counts) */
};

/* A key's count in learn_counts. */
struct santa_learn_entry {
	__u32 passes; /* in window */
	__u32 window; /* the window it last passed in */
};

/* A key whose count in a window reached the threshold (learn_samples). */
struct santa_learn_sample {
	__u64 hash;   /* its key in learn_counts and learn_watch */
	__u32 passes; /* its count then */
	__u32 learn;  /* the service's santa_service.learn */
	__u16 len;    /* bytes of key */
	__u16 pad;
	__u32 pad2;
	__u8 key[SANTA_LEARN_MAX_KEY];
};

/* Per-CPU counters for every exit of a program (path_stats): why a packet
 * was answered or passed before it could be tied to a service. */
enum santa_path {
	SANTA_PATH_ANSWERED = 0, /* reply sent */
	SANTA_PATH_NOT_IP,       /* not IPv4/IPv6 over Ethernet (VLAN tags included, in the frame or beside it) */
	SANTA_PATH_NOT_UDP,      /* another transport, or IPv6 extension headers */
	SANTA_PATH_FRAGMENT,     /* IPv4 fragment */
	SANTA_PATH_IP_OPTIONS,   /* IPv4 header with options */
	SANTA_PATH_BAD_LENGTH,   /* truncated packet, length fields that disagree, or datagrams GRO merged (TC) */
	SANTA_PATH_NOT_UNICAST,  /* multicast/broadcast destination or source, unspecified source */
	SANTA_PATH_TOO_LONG,     /* request payload above SANTA_MAX_UDP_REQUEST */
	SANTA_PATH_NO_SOCKET,    /* no local socket would receive it */
	SANTA_PATH_NOT_SERVICE,  /* the receiving socket is not registered */
	SANTA_PATH_SERVICE_PASS, /* a service's packet that was not answered (see service_stats) */
	SANTA_PATH_FALLBACK_CSUM, /* XDP left it to TC: its checksum is not verifiable in XDP (partial, without veth's skb to vouch for it) */
	SANTA_PATH_SEEN_BY_XDP,  /* TC: XDP already examined and passed this packet */
	SANTA_PATH_TX_ERROR,     /* building the reply failed after the request was overwritten: dropped */
	SANTA_PATH_BAD_IP_CSUM,  /* IPv4 header checksum wrong: the stack drops it */
	SANTA_PATH_NOT_FOR_HOST, /* frame not addressed to this interface's MAC, or from a group MAC */
	SANTA_PATH_NOT_LOCAL,    /* destination not an address of this host: the stack forwards or drops it */
	SANTA_PATH_MARTIAN,      /* source or destination the stack drops on this interface (loopback, own, broadcast) */
	SANTA_PATH_OVER_MTU,     /* the reply would not fit the interface's MTU: the application answers */
	SANTA_PATH_PROBE,        /* from the service's probe port: passed, neither answered nor counted for learning */
	SANTA_PATH_FALLBACK_TOO_LONG, /* XDP left it to TC: the reply does not fit the XDP frame */
	SANTA_PATH_FALLBACK_NO_XDP_TX, /* XDP left it to TC: the reply cannot leave by XDP (a veth whose peer has neither XDP nor GRO) */
	SANTA_PATH_SOURCE_PORT,  /* from source port 0 or a reflection port (7, 13, 19, 37): the application decides */
	SANTA_PATH_NCOUNTERS,
};

/*
 * The host's own addresses, as the kernel's local routing table has them
 * (user space keeps this map in sync): a packet is delivered locally only
 * if its destination is one (kind SANTA_ADDR_LOCAL); a source that is one,
 * or a broadcast address, is a martian off loopback. IPv4 addresses fill
 * addr[0..3], the rest zero. An IPv6 link-local address is bound to its
 * interface (ifindex); every other entry has ifindex 0.
 */
struct santa_addr_key {
	__u32 ifindex;
	__u8 family; /* 4 or 6 */
	__u8 pad[3];
	__u8 addr[16];
};

enum santa_addr_kind {
	SANTA_ADDR_LOCAL = 1,
	SANTA_ADDR_BROADCAST = 2,
};

/* Entries of the local address map; requests to a host's addresses beyond
 * them pass to the stack. */
#define SANTA_MAX_LOCAL_ADDRS 16384

/*
 * XDP leaves this in the packet's metadata when it passes a packet, so that
 * the TC program does not match it a second time. SANTA_META_FALLBACK plus a
 * SANTA_SVC_TC_* counter asks TC to answer it, and says why XDP could not:
 * TC counts that reason for the service when it answers.
 */
enum santa_meta_verdict {
	SANTA_META_SEEN = 0x53a17a01,
	SANTA_META_FALLBACK = 0x53a17b00,
};

struct santa_xdp_meta {
	__u32 verdict;
};

/*
 * TCP. Connections accepted on a registered listening socket are keyed by
 * their socket cookie in the connections map and the tcp_conns sockhash.
 * The verdict program bounces a matched request, unmodified, to the
 * connection's own egress and counts it in `pending`; the sk_msg program
 * turns the next bounced message into the reply. Requests go out in the
 * order they came in (docs/tcp.md).
 */
enum santa_conn_flag {
	/* The application answers this connection from now on: a request was
	 * passed to it, and a later one answered by the kernel could overtake
	 * its reply. */
	SANTA_CONN_PASSING = 1,
	/* Inside an application's call that answers the requests that came
	 * before accept() (santa_answer_early_requests): the verdict runs in
	 * it with the socket's lock owned, and may bounce. */
	SANTA_CONN_ACCEPTING = 2,
	/* A memcached service's connection: its streams are parsed, its
	 * state is in mc_conns (mc_inval.h). */
	SANTA_CONN_MC = 4,
	/* The reply program gave a bounced request to the application: the
	 * requests bounced after it, still pending, go to the application
	 * too, or their replies would overtake its reply. */
	SANTA_CONN_FELL_BACK = 8,
};

/* The socket option an application sets on a connection right after
 * accept() (setsockopt(fd, SANTA_SOL, SANTA_SO_ACCEPTED, &one, 4)), so
 * that requests that arrived before accept() can be answered by the
 * kernel (docs/tcp.md). Without Santa the kernel refuses it with
 * ENOPROTOOPT. */
enum santa_sockopt {
	SANTA_SOL = 0x53414e54, /* "SANT" */
	SANTA_SO_ACCEPTED = 1,
};

/* Santa's option santad sets on a connection it is about to adopt
 * (internal/datapath's AdoptConnection), at level SANTA_SOL: the
 * setsockopt hook (santa_tcp_accepted) refuses it with EBUSY if a task
 * sleeps in a blocking call on the socket, and takes it otherwise. Not
 * for applications. */
enum santa_tcp_probe {
	SANTA_SO_ADOPTABLE = 0x100,
};

/* What santa_tcp_handover did with an earlier process's connection: one
 * byte per connection in the iterator's output. */
enum santa_handover_result {
	SANTA_HANDOVER_MOVED = 1,    /* now this data plane's, state and all */
	SANTA_HANDOVER_RELEASED = 2, /* the application's alone (its listener is gone, or it was passing) */
	SANTA_HANDOVER_BUSY = 3,     /* not idle: tried again */
	SANTA_HANDOVER_LEFT = 4,     /* still not idle at the last pass: passes everything, stays */
};

/* The last reply the kernel built on a connection, kept until TCP has taken
 * all of it. The sockmap worker's send does not wait: when the send buffer
 * fills part way through a reply, TCP keeps what it took, the rest is
 * freed, and the worker sends the request again later. The reply program
 * then builds the rest of this reply from the same rule body, so long as
 * that slot was not freed since (slot_gens), and nothing else
 * (santa_reply_rest): in that try of the worker's, or in front of a
 * message the application sends first. */
struct santa_open_reply {
	__u32 seq;         /* tcp_sock.write_seq where the reply starts */
	__u32 len;         /* its length; 0: none open */
	__u32 slot;        /* its rule's body */
	__u32 gen;         /* that slot's generation when the reply was built */
	__u32 request_len; /* the request it answers, for its copy processors */
	__u32 rest_by_app; /* an application's message carried the rest in front of its own bytes: the worker's next try of the request is sent as nothing */
	__u32 sending;     /* the worker's last message was a reply or a rest, maybe still on its way to TCP (the redirect drops the socket's lock) */
	__u32 pad;
};

struct santa_conn {
	__u64 listener; /* cookie of the registered listening socket: its service */
	__u32 pending;  /* bounced requests not yet turned into replies */
	__u32 flags;    /* enum santa_conn_flag */
	__u32 ooopack;  /* tcp_sock.rcv_ooopack when attached: more means data came out of order */
	__u32 fin_held; /* when the client's FIN was first held back (ms since boot, mod 2^32, | 1); 0: never */
	__u32 owner;    /* its place's slot in conn_owners: given back there when the entry is deleted */
	__u32 pad;
	struct santa_open_reply reply;
};

/* The part of struct santa_conn whose layout every santad since connection
 * places has written alike: the handover reads only that of an earlier
 * process's entries, whose layout may be older (without the open reply) or
 * newer. Whatever follows is appended after it. */
#define SANTA_CONN_HEAD_SIZE __builtin_offsetof(struct santa_conn, reply)
_Static_assert(SANTA_CONN_HEAD_SIZE == 32, "a connection's head is what earlier santads wrote");

/* The connection places one uid's TCP listeners hold (conn_owners, by a
 * slot user space gives each uid): the connections under Santa, and the
 * memcached connections' stream states (mc_conns), which live until the
 * application lets go of the socket, maybe after the connection's end.
 * Each is taken atomically by the programs (and user space, adopting),
 * and given back by whoever deletes the entry that holds it. Beyond
 * limit, a new connection is the application's alone (SANTA_TCP_CONN_QUOTA). */
struct santa_conn_owner {
	__u32 conns; /* entries in connections */
	__u32 mc;    /* entries in mc_conns */
	__u32 limit; /* the most of each at once; 0: no limit but the maps' size */
	__u32 pad;
};

/* How long a client's FIN is held back at most (santa_tcp_hold_fin): a
 * sockmap worker that waits that long (a client that does not read its
 * replies) lets the end of the stream through, as it was before. */
#define SANTA_FIN_HOLD_MS 1000

/* Per-CPU counters for every exit of the TCP programs (tcp_path_stats). */
enum santa_tcp_path {
	SANTA_TCP_BOUNCED = 0,     /* verdict: matched, sent to egress to become the reply */
	SANTA_TCP_ANSWERED,        /* sk_msg: reply built */
	SANTA_TCP_NOT_CONN,        /* verdict: not a connection of a registered listener */
	SANTA_TCP_NO_SERVICE,      /* verdict: its listener is no longer registered */
	SANTA_TCP_PASSING,         /* verdict: the application answers this connection already */
	SANTA_TCP_EMPTY,           /* verdict: no payload (a FIN) */
	SANTA_TCP_TOO_LONG,        /* verdict: segment above SANTA_MAX_TCP_REQUEST */
	SANTA_TCP_OUT_OF_ORDER,    /* verdict: the connection received data out of order */
	SANTA_TCP_NO_MATCH,        /* verdict: no rule covers the segment exactly */
	SANTA_TCP_BUSY,            /* verdict: too many requests bounced and not yet answered */
	SANTA_TCP_ERROR,           /* verdict: the request could not be read or bounced */
	SANTA_TCP_REPLY_FALLBACK,  /* sk_msg: the rule went meanwhile, the reply could not be built, or (preemptible kernels) the reply memory was in use: the request goes to the application */
	SANTA_TCP_REPLY_BROKEN,    /* sk_msg: the message was changed but the reply not completed, or the rest of a reply TCP took part of could not be built (its rule's slot was freed since): dropped, the connection ends in an error */
	SANTA_TCP_NEW_CONN,        /* sock_ops: a connection of a registered listener was added */
	SANTA_TCP_CONN_FULL,       /* sock_ops: the connections map or sockhash was full */
	SANTA_TCP_APP_RECEIVING,   /* verdict: the application is inside a receive call on the connection */
	SANTA_TCP_FIN,             /* verdict: the segment also ends the client's stream, or the stream has ended */
	SANTA_TCP_FIN_HELD,        /* cgroup skb: a client's FIN dropped, to come again once the kernel has sent its replies */
	SANTA_TCP_NO_BUFFER,       /* verdict: every request buffer of its CPU was taken by runs it interrupted */
	SANTA_TCP_REPLY_REST,      /* sk_msg: the rest of a reply the send buffer had room for only part of */
	SANTA_TCP_REST_BEFORE_APP, /* sk_msg: the application wrote while a reply of the kernel's was not all queued: the rest of the reply went in front of its message */
	SANTA_TCP_CONN_QUOTA,      /* sock_ops: the listener's uid holds every connection place its quota allows */
	SANTA_TCP_NPATHS,
};

/* Bounced requests a connection may have waiting for their reply. */
#define SANTA_MAX_PENDING 64

/*
 * memcached invalidation (docs/memcached.md, "Invalidation"). A service
 * whose parser is SANTA_PARSER_MEMCACHED has every request it receives
 * parsed (TCP: the verdict, all connections, every state; UDP: XDP, or TC
 * when XDP did not see it), and every reply of its TCP connections (sk_msg)
 * and of its UDP socket (cgroup egress, mc_udp.h).
 * A write bumps its key's slot generation when it arrives and again when
 * memcached's reply to it leaves; in between the slot is in flight. A rule
 * with a guard answers only while its slot and its domain have the
 * generations it was built at, nothing of either is in flight, and its
 * deadline has not passed.
 */
enum santa_parser {
	SANTA_PARSER_NONE = 0,
	SANTA_PARSER_MEMCACHED = 1,
};

enum santa_rule_flag {
	SANTA_RULE_GUARDED = 1, /* a struct santa_guard ends the body's reply area */
	/* A memcached datagram it matches is its condition, all of it from byte
	 * 2, and holds reads only (santad parsed it with the reference parser):
	 * santa_udp skips looking for writes in it. */
	SANTA_RULE_READ_ONLY = 2,
};

enum santa_mc_layout {
	SANTA_MC_SLOTS = 1 << 20,   /* generation slots of all domains: 8 MiB */
	SANTA_MC_RING = 16,         /* one-key writes of a connection in flight; more count domain-wide */
	SANTA_MC_NO_SLOT = 0xffffffffu, /* a guard of the domain alone */
	SANTA_MC_UDP_WRITES = 8192,     /* UDP writes held at once (mc_udp.h); more hold their domain */
	SANTA_MC_UDP_HOLD_MS = 1000,    /* a UDP write with no reply seen is released this long after its arrival */
	SANTA_MC_CLOCK_SLACK_MS = 1000, /* memcached's clock ticks once a second: a delayed flush_all may come this late */
	SANTA_MC_CLOCK_LAG_MS = 2100,   /* how far memcached's clock may lag: an item may expire this much before its exptime */
	SANTA_MC_FRESH = 1 << 15,       /* values taken from sets (mc_fresh), by slot modulo this: 10 MiB */
	SANTA_MC_FRESH_LEN = 256,       /* bytes of a GET's reply text a set may give (after the frame header) */
	SANTA_MC_FRAME = 8,             /* memcached's UDP frame header */
	SANTA_MC_FILLS = 1 << 16,       /* datagrams awaiting their reply, by client and request id (mc_fill.h): about 6 MiB */
};

/* A key's generation slot: slot = santa_mc_slot_of(FNV-1a 32 of the key, domain). */
struct santa_mc_slot {
	__u32 gen;      /* bumped by every write to a key of the slot, at its arrival and at its reply */
	__u32 inflight; /* writes to the slot received and not yet answered */
};

/* A domain's generation (mc_domains, by domain id), the kernel's alone:
 * user space only reads it. */
struct santa_mc_domain {
	__u32 gen;      /* bumped by a write of unknown keys (flush_all, lost sync), at arrival and at reply */
	__u32 inflight; /* such writes received and not yet answered */
	__u32 unsynced; /* connections whose writes cannot be followed, alive: nothing of the domain answers */
	__u32 mortal;   /* a write that may give unknown keys an expiry was seen: no get's reply refills (mc_fill.h) */
	/* bpf_ktime_get_ns until which nothing of the domain answers (a
	 * delayed flush_all pending, UDP writes that could not be held one
	 * by one); 0: none. Whoever first sees it past bumps gen, then clears
	 * it (guard.h, santa_mc_settle). */
	__u64 hold_until;
};

/* What a guarded rule keeps at the end of its class's reply area (rules
 * with a guard take the class of reply_len + sizeof(struct santa_guard)). */
struct santa_guard {
	__u64 deadline;   /* bpf_ktime_get_ns (CLOCK_MONOTONIC) past which it never answers; 0: none */
	__u32 domain;
	__u32 epoch;      /* the domain's life it was built in (mc_live) */
	__u32 slot;       /* SANTA_MC_NO_SLOT: no key */
	__u32 gen;        /* the slot's generation it was built at */
	__u32 domain_gen; /* the domain's */
	__u32 flags;      /* enum santa_guard_flag */
};

enum santa_guard_flag {
	/* The rule answers memcached's UDP "get <key>" of its guard's key with
	 * memcached's reply, "VALUE <key> <flags> <bytes>\r\n<data>\r\nEND\r\n"
	 * after the frame header, its copies in the frame header only (santad
	 * checked the shape): once a set of the key has changed the value, it
	 * may answer with the set's value instead (mc_fresh.h). */
	SANTA_GUARD_FRESH = 1,
};

/* A value taken from a set over TCP (mc_fresh, at slot % SANTA_MC_FRESH):
 * the reply text a GET of its key gets once memcached stored it. */
struct santa_mc_fresh {
	__u32 seq;      /* odd while written: readers check it around their copy */
	__u32 slot;     /* the key's generation slot */
	__u32 domain;
	__u32 gen;      /* the slot's generation it answers at, once ready */
	__u64 cookie;   /* the connection of the set, until ready */
	__u32 cmd_seq;  /* the set's reply number on its connection (mc_req_state.due) */
	__u8 ready;     /* memcached stored it, and nothing else wrote the slot */
	__u8 pad;
	__u16 keylen;   /* the key: text[6, 6 + keylen) */
	__u16 len;      /* bytes of text */
	__u16 pad2;
	__s32 ttl;      /* the set's exptime in seconds, 0: none */
	__u64 deadline; /* bpf_ktime_get_ns past which it never answers; 0: none */
	__u32 sum;      /* native-word sum of text (it starts at an even reply offset) */
	__u32 pad3;
	__u8 text[SANTA_MC_FRESH_LEN];
};

/* Per-CPU counters per domain (mc_stats). */
enum santa_mc_counter {
	SANTA_MC_WRITES = 0,      /* write commands received (TCP and UDP) */
	SANTA_MC_KEY_BUMPS,       /* key generations bumped: a write's arrival or its reply */
	SANTA_MC_DOMAIN_BUMPS,    /* domain generations bumped: flush_all, unknown keys, lost sync, a close */
	SANTA_MC_COMPLETED,       /* writes whose reply left */
	SANTA_MC_RELEASED,        /* writes in flight when their connection closed */
	SANTA_MC_OVERFLOW,        /* one-key writes beyond a connection's ring: counted domain-wide */
	SANTA_MC_LOST,            /* streams (connections, datagrams) whose sync was lost */
	SANTA_MC_GUARD_STALE,     /* a guarded rule matched at an older generation: passed */
	SANTA_MC_GUARD_INFLIGHT,  /* a guarded rule matched while a write was in flight or a connection unsynced: passed */
	SANTA_MC_GUARD_EXPIRED,   /* a guarded rule matched past its deadline: passed */
	SANTA_MC_UDP_HELD,        /* UDP writes held until their reply or SANTA_MC_UDP_HOLD_MS */
	SANTA_MC_UDP_TIMED_OUT,   /* UDP writes released at SANTA_MC_UDP_HOLD_MS: no reply of theirs seen */
	SANTA_MC_UDP_DOMAIN,      /* UDP writes that held their whole domain: table full, a request id in flight */
	SANTA_MC_DELAYED_FLUSH,   /* flush_all with a delay: the domain held until it happened */
	SANTA_MC_REFRESHED,       /* sets stored whose value the kernel answers from now (mc_fresh) */
	SANTA_MC_FRESH_TORN,      /* answers from a set's value dropped: the value changed while it was copied */
	SANTA_MC_FILLED,          /* memcached's replies to gets the kernel answers their key's gets with from then (mc_fill.h) */
	SANTA_MC_NCOUNTERS,
};

struct santa_mc_stats {
	__u64 n[SANTA_MC_NCOUNTERS];
};

#endif /* SANTA_ABI_H */
