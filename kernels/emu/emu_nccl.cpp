/* The emulator's NCCL over MPI (nccl_emu.h; README.md, "NCCL"). A communicator is an MPI
 * communicator of its own (split from MPI_COMM_WORLD by the unique id), so its collectives match
 * nothing else. Each collective is work that waits on its stream (emu_internal.h): when the
 * stream reaches it, the ranks first exchange what each called (MPI_Iallgather of a descriptor)
 * and a mismatch ends the process; then the send buffer is copied (it is final: everything before
 * it on the stream is complete) and the collective started on the copy (MPI_Iallreduce,
 * MPI_Iallgather, MPI_Ireduce, MPI_Ibcast); the result goes into the receive buffer when MPI says it is complete, so a
 * reader that did not wait for the stream sees the old contents, never a part of the new. The
 * collectives of one communicator start in the order they were called, whatever their streams. */
#include "kernels/emu/nccl_emu.h"

#include <mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <memory>
#include <vector>

#include "kernels/emu/emu_internal.h"

struct ncclComm {
  MPI_Comm comm;
  int rank, nranks;
  int64_t called;  /* collectives called so far */
  int64_t started; /* of those, how many have started (in call order) */
  char last_error[256];
};

static char g_last_error[256]; /* the last error outside a communicator */

static ncclResult_t fail(ncclComm_t c, ncclResult_t r, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static ncclResult_t fail(ncclComm_t c, ncclResult_t r, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c ? c->last_error : g_last_error, sizeof g_last_error, fmt, ap);
  va_end(ap);
  return r;
}

const char *ncclGetErrorString(ncclResult_t r) {
  switch (r) {
  case ncclSuccess: return "no error";
  case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
  case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
  case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
  case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
  case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
  case ncclRemoteError: return "remote process exited or there was a network error";
  case ncclInProgress: return "NCCL operation in progress";
  default: return "unknown result code";
  }
}

const char *ncclGetLastError(ncclComm_t comm) { return comm ? comm->last_error : g_last_error; }

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  if (!id) return fail(NULL, ncclInvalidArgument, "ncclGetUniqueId: uniqueId is NULL");
  static unsigned counter = 0;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  memset(id, 0, sizeof *id);
  snprintf(id->internal, sizeof id->internal, "txl-emu-nccl %ld %ld.%09ld %u", (long)getpid(), (long)ts.tv_sec,
           ts.tv_nsec, ++counter);
  return ncclSuccess;
}

static int id_color(const ncclUniqueId &id) { /* FNV-1a of the id, as a non-negative MPI colour */
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < sizeof id.internal; i++) h = (h ^ (unsigned char)id.internal[i]) * 16777619u;
  return (int)(h & 0x7fffffff);
}

/* collective over MPI_COMM_WORLD (every rank of the world calls it, as txl does) */
ncclResult_t ncclCommInitRank(ncclComm_t *out, int nranks, ncclUniqueId id, int rank) {
  if (!out) return fail(NULL, ncclInvalidArgument, "ncclCommInitRank: comm is NULL");
  *out = NULL;
  int mpi_on = 0;
  MPI_Initialized(&mpi_on);
  if (!mpi_on) return fail(NULL, ncclInvalidUsage, "ncclCommInitRank: the emulated NCCL runs over MPI, which is not initialised");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return fail(NULL, ncclInvalidArgument, "ncclCommInitRank: rank %d of %d ranks", rank, nranks);
  MPI_Comm comm;
  int world_rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  if (MPI_Comm_split(MPI_COMM_WORLD, id_color(id), rank, &comm) != MPI_SUCCESS)
    return fail(NULL, ncclSystemError, "ncclCommInitRank: MPI_Comm_split failed");
  int size = 0;
  MPI_Comm_size(comm, &size);
  std::vector<int> ranks((size_t)size);
  MPI_Allgather(&rank, 1, MPI_INT, ranks.data(), 1, MPI_INT, comm);
  std::vector<char> seen((size_t)nranks, 0);
  bool ok = size == nranks;
  for (int r : ranks) {
    if (r < 0 || r >= nranks || seen[(size_t)r]) ok = false;
    else seen[(size_t)r] = 1;
  }
  if (!ok) {
    MPI_Comm_free(&comm);
    return fail(NULL, ncclInvalidUsage, "ncclCommInitRank: %d processes joined the id (world rank %d among them) for %d "
                "ranks, or two gave the same rank", size, world_rank, nranks);
  }
  ncclComm_t c = new ncclComm;
  c->comm = comm;
  c->rank = rank;
  c->nranks = nranks;
  c->called = c->started = 0;
  c->last_error[0] = 0;
  *out = c;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *asyncError) {
  if (!comm || !asyncError) return fail(comm, ncclInvalidArgument, "ncclCommGetAsyncError: NULL argument");
  emu_progress();
  *asyncError = ncclSuccess; /* a mismatch ends the process instead (README.md, "NCCL") */
  return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (!comm) return fail(NULL, ncclInvalidArgument, "ncclCommFinalize: comm is NULL");
  emu_drain(NULL); /* a blocking communicator returns once its collectives are complete */
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return fail(NULL, ncclInvalidArgument, "ncclCommDestroy: comm is NULL");
  if (comm->started != comm->called) emu_drain(NULL);
  MPI_Comm_free(&comm->comm);
  delete comm;
  return ncclSuccess;
}

/* ---- the collectives ------------------------------------------------------------------------ */
enum Kind { ALL_REDUCE = 1, ALL_GATHER = 2, REDUCE = 3, BROADCAST = 4 };

/* What a rank called, compared across ranks before the data moves. */
struct Call {
  int64_t seq;    /* its number among the communicator's collectives */
  int32_t kind, type, op, root; /* root: of a reduce or broadcast (else 0) */
  uint64_t count; /* elements (all-gather: sent by each rank) */
};

static size_t type_bytes(ncclDataType_t t) {
  switch (t) {
  case ncclInt8: case ncclUint8: return 1;
  case ncclFloat16: case ncclBfloat16: return 2;
  case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
  case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
  default: return 0;
  }
}

static MPI_Datatype mpi_type(ncclDataType_t t) {
  switch (t) {
  case ncclInt8: return MPI_INT8_T;
  case ncclUint8: return MPI_UINT8_T;
  case ncclInt32: return MPI_INT32_T;
  case ncclUint32: return MPI_UINT32_T;
  case ncclInt64: return MPI_INT64_T;
  case ncclUint64: return MPI_UINT64_T;
  case ncclFloat32: return MPI_FLOAT;
  case ncclFloat64: return MPI_DOUBLE;
  default: return MPI_DATATYPE_NULL; /* fp16, bf16: not emulated in reductions */
  }
}

static MPI_Op mpi_op(ncclRedOp_t op) {
  switch (op) {
  case ncclSum: return MPI_SUM;
  case ncclProd: return MPI_PROD;
  case ncclMax: return MPI_MAX;
  case ncclMin: return MPI_MIN;
  default: return MPI_OP_NULL; /* ncclAvg: not emulated */
  }
}

static const char *kind_name(int k) {
  switch (k) {
  case ALL_REDUCE: return "ncclAllReduce";
  case ALL_GATHER: return "ncclAllGather";
  case REDUCE: return "ncclReduce";
  case BROADCAST: return "ncclBroadcast";
  default: return "?";
  }
}

static bool reduces(int k) { return k == ALL_REDUCE || k == REDUCE; }
static bool rooted(int k) { return k == REDUCE || k == BROADCAST; }

static void describe(const Call &c, char *out, size_t n) {
  char op[32] = "", root[32] = "";
  if (reduces(c.kind)) snprintf(op, sizeof op, ", operation %d", c.op);
  if (rooted(c.kind)) snprintf(root, sizeof root, ", root %d", c.root);
  snprintf(out, n, "%s of %llu elements of type %d%s%s", kind_name(c.kind), (unsigned long long)c.count, c.type, op, root);
}

/* The step of one collective (see the top of this file). */
struct Collective {
  ncclComm_t comm;
  Call call;
  const void *send;
  void *recv;
  size_t send_bytes, recv_bytes;
  int phase = 0; /* 0 not started, 1 descriptors moving, 2 data moving */
  std::vector<Call> all;
  std::vector<unsigned char> in, out;
  MPI_Request req = MPI_REQUEST_NULL;

  bool test() {
    int done = 0;
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    return done != 0;
  }

  void check_calls() {
    const Call &mine = all[(size_t)comm->rank];
    for (int r = 0; r < comm->nranks; r++) {
      const Call &o = all[(size_t)r];
      if (o.seq == mine.seq && o.kind == mine.kind && o.type == mine.type && o.op == mine.op && o.root == mine.root &&
          o.count == mine.count)
        continue;
      char a[160], b[160];
      describe(mine, a, sizeof a);
      describe(o, b, sizeof b);
      emu_die("emulated NCCL: collective #%lld of the communicator does not match across ranks: rank %d called %s, "
              "rank %d called %s (collective #%lld there)", (long long)mine.seq + 1, comm->rank, a, r, b,
              (long long)o.seq + 1);
    }
  }

  bool step() {
    if (phase == 0) {
      if (comm->started != call.seq) return false; /* an earlier collective of the communicator first */
      comm->started++;
      all.resize((size_t)comm->nranks);
      MPI_Iallgather(&call, (int)sizeof call, MPI_BYTE, all.data(), (int)sizeof call, MPI_BYTE, comm->comm, &req);
      phase = 1;
    }
    if (phase == 1) {
      if (!test()) return false;
      check_calls();
      if (send_bytes)
        in.assign(static_cast<const unsigned char *>(send), static_cast<const unsigned char *>(send) + send_bytes);
      out.resize(recv_bytes);
      const ncclDataType_t t = (ncclDataType_t)call.type;
      const MPI_Op op = mpi_op((ncclRedOp_t)call.op);
      switch (call.kind) {
      case ALL_REDUCE: MPI_Iallreduce(in.data(), out.data(), (int)call.count, mpi_type(t), op, comm->comm, &req); break;
      case REDUCE: /* the root's result only (out is empty elsewhere) */
        MPI_Ireduce(in.data(), out.data(), (int)call.count, mpi_type(t), op, call.root, comm->comm, &req);
        break;
      case BROADCAST: /* the root's copy of its send buffer, to every rank's out */
        if (comm->rank == call.root) out = in;
        MPI_Ibcast(out.data(), (int)recv_bytes, MPI_BYTE, call.root, comm->comm, &req);
        break;
      default: MPI_Iallgather(in.data(), (int)send_bytes, MPI_BYTE, out.data(), (int)send_bytes, MPI_BYTE, comm->comm, &req);
      }
      phase = 2;
    }
    if (!test()) return false;
    if (recv_bytes) memcpy(recv, out.data(), recv_bytes);
    return true;
  }
};

static ncclResult_t enqueue(ncclComm_t comm, cudaStream_t stream, int kind, const void *send, void *recv, size_t count,
                            ncclDataType_t type, ncclRedOp_t op, int root) {
  const char *name = kind_name(kind);
  if (!comm) return fail(NULL, ncclInvalidArgument, "%s: comm is NULL", name);
  if (!type_bytes(type)) return fail(comm, ncclInvalidArgument, "%s: data type %d", name, (int)type);
  if (reduces(kind) && (mpi_type(type) == MPI_DATATYPE_NULL || mpi_op(op) == MPI_OP_NULL))
    return fail(comm, ncclInvalidArgument, "%s: data type %d with operation %d: not emulated", name, (int)type, (int)op);
  if (rooted(kind) && (root < 0 || root >= comm->nranks))
    return fail(comm, ncclInvalidArgument, "%s: root %d of a communicator of %d ranks", name, root, comm->nranks);
  const size_t elem = type_bytes(type);
  const bool is_root = rooted(kind) && comm->rank == root;
  /* what this rank sends and receives: a reduce's result reaches the root alone, a broadcast's
   * send buffer is the root's alone (NCCL reads neither elsewhere) */
  size_t send_bytes = count * elem, recv_bytes = kind == ALL_GATHER ? send_bytes * (size_t)comm->nranks : send_bytes;
  if (kind == REDUCE && !is_root) recv_bytes = 0;
  if (kind == BROADCAST && !is_root) send_bytes = 0;
  if (count > (size_t)INT32_MAX || count * elem > (size_t)INT32_MAX)
    return fail(comm, ncclInvalidArgument, "%s: %zu elements: more than the emulator moves in one call", name, count);
  if (count && ((send_bytes && !send) || (recv_bytes && !recv))) return fail(comm, ncclInvalidArgument, "%s: a NULL buffer", name);
  auto c = std::make_shared<Collective>();
  c->comm = comm;
  c->call = Call{0, kind, (int32_t)type, reduces(kind) ? (int32_t)op : 0, rooted(kind) ? root : 0, (uint64_t)count};
  c->send = send;
  c->recv = recv;
  c->send_bytes = send_bytes;
  c->recv_bytes = recv_bytes;
  /* each execution (the call, or each replay of a graph that captured it) is a collective of its
   * own, numbered when it is issued: outside a capture that is now */
  const cudaError_t e = emu_enqueue_async(stream, [c]() -> Step {
    auto run = std::make_shared<Collective>(*c);
    run->call.seq = run->comm->called++;
    return [run]() { return run->step(); };
  });
  if (e != cudaSuccess) return fail(comm, ncclUnhandledCudaError, "%s: the stream refused it: %s", name, cudaGetErrorString(e));
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                           ncclComm_t comm, cudaStream_t stream) {
  return enqueue(comm, stream, ALL_REDUCE, sendbuff, recvbuff, count, datatype, op, 0);
}

ncclResult_t ncclReduce(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                        int root, ncclComm_t comm, cudaStream_t stream) {
  return enqueue(comm, stream, REDUCE, sendbuff, recvbuff, count, datatype, op, root);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count, ncclDataType_t datatype, int root,
                           ncclComm_t comm, cudaStream_t stream) {
  return enqueue(comm, stream, BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root);
}

/* A group only lets NCCL start its calls together; the emulator runs them one after another in
 * call order, one of the schedules NCCL may choose (every rank calls the same ones in the same
 * order, so none waits for a call another rank makes later). Only the nesting is checked. */
static int g_group_depth;

ncclResult_t ncclGroupStart(void) {
  g_group_depth++;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
  if (g_group_depth == 0) return fail(NULL, ncclInvalidUsage, "ncclGroupEnd without an ncclGroupStart");
  g_group_depth--;
  return ncclSuccess;
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount, ncclDataType_t datatype,
                           ncclComm_t comm, cudaStream_t stream) {
  return enqueue(comm, stream, ALL_GATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0);
}
