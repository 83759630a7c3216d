/* The CPU emulator's streams and events, synchronous no-ops outside a capture (everything is
 * already complete when a call returns), and stream capture into one list of nodes that
 * cudaGraphLaunch replays, with the errors a capture gives (README.md, "Stream capture and
 * graphs"). The capture state is this file's; the other parts of the emulator reach it through
 * emu_internal.h (emu_enqueue, emu_record, emu_invalidate, emu_legacy_use, emu_unsafe_call). */
#include "kernels/emu/emu_internal.h"

#include <time.h>

#include <memory>
#include <vector>

/* ---- stream capture (README.md, "Stream capture and graphs") --------------------------------- */
typedef std::shared_ptr<const std::vector<Node>> Nodes;

/* One capture sequence: begun on `origin`, joined by the streams that waited on one of its
 * events; one list in enqueue order (a valid serialisation of its dependencies: the emulator
 * runs everything in order anyway). */
struct Capture {
  unsigned long long id;
  cudaStream_t origin;
  bool invalidated;
  std::vector<cudaStream_t> streams; /* origin first */
  std::vector<Node> nodes;
};
/* What one record of an event stands for outside a capture: complete once the work before it is. */
struct EventMark {
  bool done;
  double seconds; /* CLOCK_MONOTONIC when it completed */
};
struct CUevent_st {
  unsigned int flags;
  bool recorded;
  std::shared_ptr<EventMark> mark; /* the last record outside a capture (NULL: none yet) */
  unsigned long long capture_id;  /* recorded in this capture (0: not in a capture) */
  cudaStream_t stream;            /* on this stream, */
  long at;                        /* after its first `at` operations of the capture */
};
struct CUgraph_st {
  Nodes nodes;
};
struct CUgraphExec_st {
  Nodes nodes;
};

static std::vector<Capture *> g_captures; /* the captures in progress */
static std::vector<cudaStream_t> g_streams; /* every stream created and not destroyed */
static long g_queued = 0;                    /* operations in their work queues */
static unsigned long long g_capture_ids = 0;
static long g_graph_launches = 0, g_graph_kernels = 0;

extern "C" void txl_emu_graph_counts(long *graph_launches, long *graph_kernels) {
  *graph_launches = g_graph_launches;
  *graph_kernels = g_graph_kernels;
}

void emu_graph_kernel(void) { g_graph_kernels++; }

static Capture *live_capture(unsigned long long id) {
  for (Capture *c : g_captures)
    if (c->id == id) return c;
  return NULL;
}

void emu_invalidate(Capture *c) { c->invalidated = true; }

cudaError_t emu_legacy_use(bool invalidating) {
  bool hit = false;
  for (Capture *c : g_captures)
    for (cudaStream_t s : c->streams)
      if (!(s->flags & cudaStreamNonBlocking)) {
        if (invalidating) emu_invalidate(c);
        hit = true;
        break;
      }
  return hit ? emu_set_error(cudaErrorStreamCaptureImplicit) : cudaSuccess;
}

cudaError_t emu_unsafe_call(void) {
  if (g_captures.empty()) return cudaSuccess;
  for (Capture *c : g_captures) emu_invalidate(c);
  return emu_set_error(cudaErrorStreamCaptureUnsupported);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- work that waits (README.md, "Work that waits") ------------------------------------------ */
void emu_progress(void) {
  static bool running = false; /* a step that enqueues (none does) would come back here */
  if (!g_queued || running) return;
  running = true;
  for (bool moved = true; moved;) {
    moved = false;
    for (size_t i = 0; i < g_streams.size(); i++) {
      cudaStream_t s = g_streams[i];
      while (!s->work.empty() && s->work.front()()) {
        s->work.pop_front();
        g_queued--;
        moved = true;
      }
    }
  }
  running = false;
}

extern "C" void txl_emu_progress(void) { emu_progress(); }

/* The host waits for done(): the work goes on between naps that double from 20 us to 1 ms. */
template <class Done>
static void host_wait(Done done) {
  emu_progress();
  for (long nap_ns = 20000; !done(); nap_ns = nap_ns < 1000000 ? 2 * nap_ns : nap_ns) {
    struct timespec ts = {0, nap_ns};
    nanosleep(&ts, NULL);
    emu_progress();
  }
}

void emu_drain(cudaStream_t s) {
  if (s) host_wait([s]() { return s->work.empty(); });
  else host_wait([]() { return g_queued == 0; });
}

/* The legacy stream waits for every blocking stream (one created without cudaStreamNonBlocking):
 * here the host does, before work on the legacy stream runs. */
void emu_drain_blocking(void) {
  host_wait([]() {
    for (cudaStream_t s : g_streams)
      if (!(s->flags & cudaStreamNonBlocking) && !s->work.empty()) return false;
    return true;
  });
}

static Step plain(Node n) {
  return [n]() {
    n.run();
    return true;
  };
}

/* Puts st at the end of s's work queue (it runs there once everything before it has). */
static void queue_step(cudaStream_t s, Step st) {
  s->work.push_back(std::move(st));
  g_queued++;
}

void emu_defer(cudaStream_t s, Node n) {
  queue_step(s, n.async ? n.async() : plain(std::move(n)));
  emu_progress();
}

/* Node n on stream s outside a capture: queued (and run now as far as it goes when s was idle);
 * on the legacy stream, behind which nothing queues here, the host waits until it completes. */
static void start_node(cudaStream_t s, Node n) {
  if (s) {
    emu_defer(s, std::move(n));
    return;
  }
  Step st = n.async ? n.async() : plain(std::move(n));
  host_wait([&st]() { return st(); });
}

Enqueue emu_enqueue(cudaStream_t s, cudaError_t *err) {
  *err = cudaSuccess;
  if (!s) {
    *err = emu_legacy_use();
    if (*err != cudaSuccess) return ENQ_FAIL;
    emu_drain_blocking();
    return ENQ_RUN;
  }
  if (!s->capture) {
    emu_progress();
    return s->work.empty() ? ENQ_RUN : ENQ_DEFER;
  }
  if (s->capture->invalidated) {
    *err = emu_set_error(cudaErrorStreamCaptureInvalidated);
    return ENQ_FAIL;
  }
  return ENQ_RECORD;
}

void emu_record(cudaStream_t s, Node n) {
  s->capture->nodes.push_back(std::move(n));
  s->ops++;
}

cudaError_t emu_enqueue_async(cudaStream_t s, std::function<Step()> make) {
  cudaError_t err;
  const Enqueue q = emu_enqueue(s, &err);
  if (q == ENQ_FAIL) return err;
  Node n;
  n.async = std::move(make);
  if (q == ENQ_RECORD) {
    emu_record(s, std::move(n));
    return cudaSuccess;
  }
  start_node(s, std::move(n));
  return cudaSuccess;
}

/* One execution of a graph's nodes in order, resumed where a node has not completed yet. */
static Step replay(Nodes nodes) {
  size_t i = 0;
  Step cur;
  return [nodes, i, cur]() mutable {
    for (;;) {
      if (cur) {
        if (!cur()) return false;
        cur = nullptr;
        i++;
      }
      if (i == nodes->size()) return true;
      const Node &n = (*nodes)[i];
      if (n.async) {
        cur = n.async();
        continue;
      }
      n.run();
      i++;
    }
  };
}

/* ---- runtime: streams and events (everything is already complete when a call returns) ---- */
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) {
  if (!stream) return emu_set_error(cudaErrorInvalidValue);
  *stream = new CUstream_st{flags, NULL, 0, 0, {}};
  g_streams.push_back(*stream);
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream) return emu_set_error(cudaErrorInvalidResourceHandle);
  if (stream->capture) emu_die("cudaStreamDestroy of a stream that takes part in a capture: not emulated");
  /* a GPU returns at once and frees the stream once its work is done: the host waits for it here */
  emu_drain(stream);
  for (size_t i = 0; i < g_streams.size(); i++)
    if (g_streams[i] == stream) g_streams.erase(g_streams.begin() + (long)i);
  delete stream;
  return cudaSuccess;
}

/* The legacy stream's rule; a stream that takes part in a capture cannot be waited for
 * (cudaErrorStreamCaptureUnsupported, the capture invalidated). */
cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (!stream) {
    const cudaError_t e = emu_legacy_use();
    if (e != cudaSuccess) return e;
  } else if (stream->capture) {
    emu_invalidate(stream->capture);
    return emu_set_error(cudaErrorStreamCaptureUnsupported);
  }
  emu_host_sync("cudaStreamSynchronize", 0);
  if (stream) emu_drain(stream);
  else emu_drain_blocking();
  return cudaSuccess;
}

/* In a capture (README.md, "Stream capture and graphs"): waiting on an event recorded in a
 * capture makes the stream join that capture (fork) or marks the recording stream's work up to
 * the record as joined; a capturing stream may not wait on an event recorded outside its
 * capture (cudaErrorStreamCaptureIsolation) or in another capture (cudaErrorStreamCaptureMerge). */
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int) {
  if (!event) return emu_set_error(cudaErrorInvalidResourceHandle);
  if (!stream) {
    const cudaError_t e = emu_legacy_use();
    if (e != cudaSuccess) return e;
  }
  Capture *c = live_capture(event->capture_id);
  if (!c) { /* an event recorded outside any capture in progress */
    if (stream && stream->capture && event->recorded) {
      emu_invalidate(stream->capture);
      return emu_set_error(cudaErrorStreamCaptureIsolation);
    }
    emu_progress();
    const std::shared_ptr<EventMark> m = event->mark;
    if (!m || m->done) return cudaSuccess; /* the work before the record is complete */
    if (!stream) { /* the legacy stream: the host waits, nothing queues behind it here */
      host_wait([m]() { return m->done; });
      return cudaSuccess;
    }
    queue_step(stream, [m]() { return m->done; }); /* the work after waits for the record */
    return cudaSuccess;
  }
  if (!stream) { /* the legacy stream cannot take part in a capture */
    emu_invalidate(c);
    return emu_set_error(cudaErrorStreamCaptureUnsupported);
  }
  if (stream->capture && stream->capture != c) {
    emu_invalidate(c);
    emu_invalidate(stream->capture);
    return emu_set_error(cudaErrorStreamCaptureMerge);
  }
  if (c->invalidated) return emu_set_error(cudaErrorStreamCaptureInvalidated);
  if (!stream->capture) { /* fork: the stream joins the capture */
    stream->capture = c;
    stream->ops = 0;
    stream->joined = 0;
    c->streams.push_back(stream);
  }
  cudaStream_t from = event->stream;
  if (from != stream && event->at > from->joined) from->joined = event->at;
  return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *event, unsigned int flags) {
  if (!event) return emu_set_error(cudaErrorInvalidValue);
  *event = new CUevent_st{flags, false, NULL, 0, NULL, 0};
  return cudaSuccess;
}

cudaError_t cudaEventCreate(cudaEvent_t *event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event) return emu_set_error(cudaErrorInvalidResourceHandle);
  cudaError_t err;
  const Enqueue q = emu_enqueue(stream, &err);
  if (q == ENQ_FAIL) return err;
  if (q == ENQ_RECORD) { /* no node: the event stands for the stream's work so far in the capture */
    event->capture_id = stream->capture->id;
    event->stream = stream;
    event->at = stream->ops;
    return cudaSuccess;
  }
  event->capture_id = 0;
  event->stream = NULL;
  event->recorded = true;
  std::shared_ptr<EventMark> m = std::make_shared<EventMark>(EventMark{q == ENQ_RUN, q == ENQ_RUN ? now_s() : 0.0});
  event->mark = m;
  if (q == ENQ_DEFER) {
    queue_step(stream, [m]() {
      m->seconds = now_s();
      return m->done = true;
    });
  }
  return cudaSuccess;
}

/* An event last recorded in a capture in progress stands for no work that runs: it cannot be
 * waited for or queried (cudaErrorCapturedEvent, the capture invalidated). */
static cudaError_t captured_event(cudaEvent_t event) {
  Capture *c = live_capture(event->capture_id);
  if (!c) return cudaSuccess;
  emu_invalidate(c);
  return emu_set_error(cudaErrorCapturedEvent);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!event) return emu_set_error(cudaErrorInvalidResourceHandle);
  const cudaError_t e = captured_event(event);
  if (e != cudaSuccess) return e;
  emu_host_sync("cudaEventSynchronize", 0);
  const std::shared_ptr<EventMark> m = event->mark;
  if (m) host_wait([m]() { return m->done; });
  return cudaSuccess;
}

/* Never waits: cudaSuccess once the work before the last record is complete (or for an event
 * never recorded), else cudaErrorNotReady. */
cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (!event) return emu_set_error(cudaErrorInvalidResourceHandle);
  const cudaError_t e = captured_event(event);
  if (e != cudaSuccess) return e;
  emu_progress();
  return !event->mark || event->mark->done ? cudaSuccess : emu_set_error(cudaErrorNotReady);
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms) return emu_set_error(cudaErrorInvalidValue);
  if (!start || !end || (start->flags & cudaEventDisableTiming) ||
      (end->flags & cudaEventDisableTiming))
    return emu_set_error(cudaErrorInvalidResourceHandle);
  if (!start->recorded || !end->recorded) return emu_set_error(cudaErrorInvalidResourceHandle);
  if (!start->mark->done || !end->mark->done) return emu_set_error(cudaErrorNotReady);
  *ms = (float)((end->mark->seconds - start->mark->seconds) * 1e3);
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  if (!event) return emu_set_error(cudaErrorInvalidResourceHandle);
  delete event;
  return cudaSuccess;
}

/* ---- runtime: stream capture and graphs (README.md, "Stream capture and graphs") ------------ */
cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (mode == cudaStreamCaptureModeRelaxed)
    emu_die("cudaStreamBeginCapture with cudaStreamCaptureModeRelaxed: not emulated (Global and ThreadLocal are)");
  if (mode != cudaStreamCaptureModeGlobal && mode != cudaStreamCaptureModeThreadLocal)
    return emu_set_error(cudaErrorInvalidValue);
  if (!stream) { /* the legacy stream cannot capture */
    const cudaError_t e = emu_legacy_use();
    return e != cudaSuccess ? e : emu_set_error(cudaErrorStreamCaptureUnsupported);
  }
  if (stream->capture) return emu_set_error(cudaErrorIllegalState); /* already capturing */
  Capture *c = new Capture{++g_capture_ids, stream, false, {stream}, {}};
  g_captures.push_back(c);
  stream->capture = c;
  stream->ops = 0;
  stream->joined = 0;
  return cudaSuccess;
}

/* Ends the capture begun on `stream`: every stream of it leaves capture mode. The graph, or NULL
 * and an error when the capture was invalidated (cudaErrorStreamCaptureInvalidated) or a stream
 * that joined it has work no stream of the capture waited for (cudaErrorStreamCaptureUnjoined). */
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph) {
  if (!pGraph) return emu_set_error(cudaErrorInvalidValue);
  if (!stream) {
    const cudaError_t e = emu_legacy_use();
    return e != cudaSuccess ? e : emu_set_error(cudaErrorIllegalState);
  }
  Capture *c = stream->capture;
  if (!c) return emu_set_error(cudaErrorIllegalState); /* not capturing */
  if (c->origin != stream) {
    emu_invalidate(c);
    return emu_set_error(cudaErrorStreamCaptureUnmatched);
  }
  bool unjoined = false;
  for (cudaStream_t s : c->streams) {
    if (s != stream && s->ops > s->joined) unjoined = true;
    s->capture = NULL;
  }
  for (size_t i = 0; i < g_captures.size(); i++)
    if (g_captures[i] == c) g_captures.erase(g_captures.begin() + (long)i);
  *pGraph = NULL;
  const bool invalidated = c->invalidated;
  Nodes nodes = std::make_shared<const std::vector<Node>>(std::move(c->nodes));
  delete c;
  if (invalidated) return emu_set_error(cudaErrorStreamCaptureInvalidated);
  if (unjoined) return emu_set_error(cudaErrorStreamCaptureUnjoined);
  *pGraph = new CUgraph_st{nodes};
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *pCaptureStatus) {
  if (!pCaptureStatus) return emu_set_error(cudaErrorInvalidValue);
  if (!stream) { /* the query does not invalidate the capture */
    const cudaError_t e = emu_legacy_use(false);
    if (e != cudaSuccess) return e;
    *pCaptureStatus = cudaStreamCaptureStatusNone;
    return cudaSuccess;
  }
  *pCaptureStatus = !stream->capture               ? cudaStreamCaptureStatusNone
                    : stream->capture->invalidated ? cudaStreamCaptureStatusInvalidated
                                                   : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags) {
  if (!pGraphExec || !graph) return emu_set_error(cudaErrorInvalidValue);
  if (flags != 0) emu_die("cudaGraphInstantiate with flags 0x%llx: not emulated (0 is)", flags);
  *pGraphExec = new CUgraphExec_st{graph->nodes}; /* the nodes are immutable: shared */
  return cudaSuccess;
}

/* Runs the graph's nodes in their order (on a capturing stream: records them, as a child graph). */
cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
  if (!graphExec) return emu_set_error(cudaErrorInvalidValue);
  cudaError_t err;
  const Enqueue q = emu_enqueue(stream, &err);
  if (q == ENQ_FAIL) return err;
  const Nodes nodes = graphExec->nodes;
  if (q == ENQ_RECORD) { /* a child graph: its nodes, in order, in the capture */
    for (const Node &n : *nodes) emu_record(stream, n);
    return cudaSuccess;
  }
  g_graph_launches++;
  Node n;
  n.async = [nodes]() { return replay(nodes); };
  start_node(stream, std::move(n)); /* completes at once unless a node waits for a collective */
  return cudaSuccess;
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
  if (!graphExec) return emu_set_error(cudaErrorInvalidValue);
  delete graphExec;
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  if (!graph) return emu_set_error(cudaErrorInvalidValue);
  delete graph;
  return cudaSuccess;
}
