/* The stand-in ACL's streams and events (included by acl.h; the model is described there).
 *
 * A stream is a queue of ops: RUN (work: a kernel, a copy, an HCCL call), RECORD, WAIT and
 * RESET of an event. Ops run in queue order when the stream is driven (wsp_stub_drive); a WAIT
 * for an event whose record is queued on another stream first drives that stream up to the
 * record. A RUN op that fails leaves its error on the stream, which the next
 * aclrtSynchronizeStream returns. Streams and events live until the process ends (a handful
 * per run), so a stale handle is caught rather than reused. */
#ifndef WSP_TEST_ACL_STREAMS_H
#define WSP_TEST_ACL_STREAMS_H
#include <deque>
#include <vector>

struct WspStubStream;

struct WspStubEvent {
    bool sync = false;          /* made with ACL_EVENT_SYNC: may be reset */
    bool live = true;
    int state = 0;              /* 0: not recorded (or reset), 1: record queued, 2: happened */
    WspStubStream *on = nullptr;  /* where the record is queued */
    uint64_t at = 0;            /* the record's op number on that stream */
};

struct WspStubOp {
    int kind;                   /* 0 run, 1 record, 2 wait, 3 reset */
    WspStubEvent *event;
    std::string name;
    std::function<aclError()> run;
};

struct WspStubStream {
    int id;
    bool live = true, driving = false;
    uint64_t queued = 0, done = 0;  /* ops enqueued, ops run */
    aclError error = ACL_SUCCESS;
    std::deque<WspStubOp> ops;
};

inline std::vector<WspStubStream *> wsp_stub_streams;  /* every stream made, in order */

static inline int wsp_stub_mode() {  /* 0 late, 1 early, 2 sync */
    const char *m = std::getenv("WSP_STUB_STREAMS");
    if (!m || !*m || std::strcmp(m, "late") == 0) return 0;
    if (std::strcmp(m, "early") == 0) return 1;
    if (std::strcmp(m, "sync") == 0) return 2;
    std::fprintf(stderr, "stub ACL: WSP_STUB_STREAMS=%s is not late, early or sync\n", m);
    std::exit(9);
}

static inline bool wsp_stub_stream_live(aclrtStream s) {
    for (WspStubStream *t : wsp_stub_streams)
        if (t == s) return t->live;
    return false;
}

static inline void wsp_stub_misuse(WspStubStream *s, const std::string &what) {
    std::fprintf(stderr, "stub ACL: stream %d: %s\n", s->id, what.c_str());
    if (s->error == ACL_SUCCESS) s->error = 507018;
}

static inline void wsp_stub_run_until(WspStubStream *s, uint64_t upto);

/* run `s`'s next op */
static inline void wsp_stub_step(WspStubStream *s) {
    WspStubOp op = s->ops.front();
    s->ops.pop_front();
    switch (op.kind) {
    case 0: {
        wsp_stub_log("@" + std::to_string(s->id) + ":" + op.name);
        const aclError e = op.run();
        if (e != ACL_SUCCESS && s->error == ACL_SUCCESS) s->error = e;
        break;
    }
    case 1: op.event->state = 2; break;
    case 2:
        if (op.event->state == 1) wsp_stub_run_until(op.event->on, op.event->at + 1);
        if (op.event->state != 2)
            wsp_stub_misuse(s, "waits for an event that is not recorded (on a device it would wait "
                               "forever)");
        break;
    default: op.event->state = 0; break;
    }
    s->done++;
}

/* run `s` until `upto` of its ops have run (all of them: UINT64_MAX) */
static inline void wsp_stub_run_until(WspStubStream *s, uint64_t upto) {
    if (s->driving) {  /* it waits, through other streams, for something it has still to run */
        wsp_stub_misuse(s, "waits for its own later work through events: a deadlock");
        return;
    }
    s->driving = true;
    while (s->done < upto && !s->ops.empty()) wsp_stub_step(s);
    s->driving = false;
}

/* `s` must have run everything queued (a synchronisation, or the sync mode's every enqueue);
 * the `early` order runs every other stream first */
static inline void wsp_stub_drive(WspStubStream *s) {
    if (wsp_stub_mode() == 1)
        for (WspStubStream *t : wsp_stub_streams)
            if (t != s && t->live && !t->driving) wsp_stub_run_until(t, UINT64_MAX);
    wsp_stub_run_until(s, UINT64_MAX);
}

static inline aclError wsp_stub_push(aclrtStream stream, WspStubOp op) {
    if (!wsp_stub_stream_live(stream)) {
        std::fprintf(stderr, "stub ACL: %s on %p, which is not a live stream\n", op.name.c_str(), stream);
        return 107000;
    }
    WspStubStream *s = (WspStubStream *)stream;
    s->ops.push_back(op);
    s->queued++;
    if (wsp_stub_mode() == 2) wsp_stub_drive(s);
    return ACL_SUCCESS;
}

/* queue work on a stream (kernels, aclrtMemcpyAsync, the stand-in HCCL's calls) */
static inline aclError wsp_stub_enqueue(aclrtStream stream, const std::string &name,
                                        std::function<aclError()> run) {
    return wsp_stub_push(stream, WspStubOp{0, nullptr, name, std::move(run)});
}

static inline WspStubEvent *wsp_stub_event(aclrtEvent e) { return (WspStubEvent *)e; }

static inline aclError aclrtCreateStream(aclrtStream *s) {
    aclError e = wsp_stub_call("aclrtCreateStream");
    if (e) return e;
    WspStubStream *t = new WspStubStream;
    t->id = (int)wsp_stub_streams.size() + 1;
    wsp_stub_streams.push_back(t);
    *s = t;
    return ACL_SUCCESS;
}
static inline aclError aclrtSynchronizeStream(aclrtStream stream) {
    aclError e = wsp_stub_call("aclrtSynchronizeStream");
    if (e) return e;
    if (!wsp_stub_stream_live(stream)) return 107000;
    WspStubStream *s = (WspStubStream *)stream;
    wsp_stub_drive(s);
    e = s->error;
    s->error = ACL_SUCCESS;
    return e;
}
static inline aclError aclrtDestroyStream(aclrtStream stream) {
    aclError e = wsp_stub_call("aclrtDestroyStream");
    if (e) return e;
    if (!wsp_stub_stream_live(stream)) return 107000;
    WspStubStream *s = (WspStubStream *)stream;
    wsp_stub_drive(s);  /* as the runtime does: its work finishes first */
    s->live = false;
    return ACL_SUCCESS;
}
static inline aclError wsp_stub_new_event(aclrtEvent *e, bool sync) {
    WspStubEvent *ev = new WspStubEvent;
    ev->sync = sync;
    *e = ev;
    return ACL_SUCCESS;
}
static inline aclError aclrtCreateEvent(aclrtEvent *e) {
    aclError r = wsp_stub_call("aclrtCreateEvent");
    return r ? r : wsp_stub_new_event(e, false);
}
static inline aclError aclrtCreateEventWithFlag(aclrtEvent *e, uint32_t flag) {
    aclError r = wsp_stub_call("aclrtCreateEventWithFlag");
    return r ? r : wsp_stub_new_event(e, (flag & ACL_EVENT_SYNC) != 0);
}
static inline aclError aclrtDestroyEvent(aclrtEvent e) {
    aclError r = wsp_stub_call("aclrtDestroyEvent");
    if (r) return r;
    if (!e || !wsp_stub_event(e)->live) return 107000;
    wsp_stub_event(e)->live = false;
    return ACL_SUCCESS;
}
static inline aclError aclrtRecordEvent(aclrtEvent e, aclrtStream stream) {
    aclError r = wsp_stub_call("aclrtRecordEvent");
    if (r) return r;
    WspStubEvent *ev = wsp_stub_event(e);
    if (!ev || !ev->live || !wsp_stub_stream_live(stream)) return 107000;
    if (ev->sync && ev->state != 0) {
        std::fprintf(stderr, "stub ACL: an ACL_EVENT_SYNC event recorded again before it was reset\n");
        return 507018;
    }
    WspStubStream *s = (WspStubStream *)stream;
    ev->state = 1;
    ev->on = s;
    ev->at = s->queued;
    return wsp_stub_push(stream, WspStubOp{1, ev, "record", nullptr});
}
static inline aclError aclrtStreamWaitEvent(aclrtStream stream, aclrtEvent e) {
    aclError r = wsp_stub_call("aclrtStreamWaitEvent");
    if (r) return r;
    WspStubEvent *ev = wsp_stub_event(e);
    if (!ev || !ev->live) return 107000;
    return wsp_stub_push(stream, WspStubOp{2, ev, "wait", nullptr});
}
static inline aclError aclrtResetEvent(aclrtEvent e, aclrtStream stream) {
    aclError r = wsp_stub_call("aclrtResetEvent");
    if (r) return r;
    WspStubEvent *ev = wsp_stub_event(e);
    if (!ev || !ev->live) return 107000;
    if (!ev->sync) {  /* acl_rt.h: only an ACL_EVENT_SYNC event may be reset */
        std::fprintf(stderr, "stub ACL: aclrtResetEvent on an event not created with ACL_EVENT_SYNC\n");
        return ACL_ERROR_RT_PARAM_INVALID;
    }
    return wsp_stub_push(stream, WspStubOp{3, ev, "reset", nullptr});
}
static inline aclError aclrtSynchronizeEvent(aclrtEvent e) {
    aclError r = wsp_stub_call("aclrtSynchronizeEvent");
    if (r) return r;
    WspStubEvent *ev = wsp_stub_event(e);
    if (!ev || !ev->live) return 107000;
    if (ev->state == 1) wsp_stub_run_until(ev->on, ev->at + 1);
    if (ev->state != 2) {
        std::fprintf(stderr, "stub ACL: aclrtSynchronizeEvent on an event that is not recorded\n");
        return 507018;
    }
    return ACL_SUCCESS;
}
#endif
