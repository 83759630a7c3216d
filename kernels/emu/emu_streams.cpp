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
struct CUevent_st {
  unsigned int flags;
  bool recorded;
  double seconds;                 /* CLOCK_MONOTONIC at the record */
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

Enqueue emu_enqueue(cudaStream_t s, cudaError_t *err) {
  *err = cudaSuccess;
  if (!s) {
    *err = emu_legacy_use();
    return *err == cudaSuccess ? ENQ_RUN : ENQ_FAIL;
  }
  if (!s->capture) return ENQ_RUN;
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

static void replay(const std::vector<Node> &nodes) {
  for (const Node &n : nodes) n();
}

/* ---- runtime: streams and events (everything is already complete when a call returns) ---- */
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *stream, unsigned int flags) {
  if (!stream) return emu_set_error(cudaErrorInvalidValue);
  *stream = new CUstream_st{flags, NULL, 0, 0};
  return cudaSuccess;
}

cudaError_t cudaStreamCreate(cudaStream_t *stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream) return emu_set_error(cudaErrorInvalidResourceHandle);
  if (stream->capture) emu_die("cudaStreamDestroy of a stream that takes part in a capture: not emulated");
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
    return cudaSuccess; /* ordering only: everything before the record is complete */
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
  *event = new CUevent_st{flags, false, 0.0, 0, NULL, 0};
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
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  event->seconds = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
  event->recorded = true;
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
  return cudaSuccess;
}

/* Never waits: the work before any record is complete (cudaSuccess), as is an event never recorded. */
cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (!event) return emu_set_error(cudaErrorInvalidResourceHandle);
  return captured_event(event);
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms) return emu_set_error(cudaErrorInvalidValue);
  if (!start || !end || (start->flags & cudaEventDisableTiming) ||
      (end->flags & cudaEventDisableTiming))
    return emu_set_error(cudaErrorInvalidResourceHandle);
  if (!start->recorded || !end->recorded) return emu_set_error(cudaErrorInvalidResourceHandle);
  *ms = (float)((end->seconds - start->seconds) * 1e3);
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
  if (q == ENQ_RECORD) {
    emu_record(stream, [nodes]() { replay(*nodes); });
    return cudaSuccess;
  }
  g_graph_launches++;
  replay(*nodes);
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
