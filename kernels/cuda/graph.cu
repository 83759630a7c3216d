/* CUDA graphs of the compute stream (cuda_ops.h): the training step captured once and replayed
 * (run.cuda_graph, src/train/graph_step.c). The capture is in the global mode: a call that would
 * make the host wait, allocate or touch the legacy stream while the step is being captured fails
 * (CUDA_CHECK ends the job naming it), where the relaxed mode would let some through. */
#include "kernels/cuda/cuda_ops.h"
#include "kernels/cuda/cuda_util.h"

extern "C" void txl_cuda_graph_begin(void) {
  CUDA_CHECK(cudaStreamBeginCapture(txl_cuda_stream(), cudaStreamCaptureModeGlobal));
}

extern "C" void *txl_cuda_graph_end(void) {
  cudaGraph_t graph = NULL;
  CUDA_CHECK(cudaStreamEndCapture(txl_cuda_stream(), &graph));
  cudaGraphExec_t exec = NULL;
  CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_CHECK(cudaGraphDestroy(graph)); /* the instantiated graph keeps what it needs */
  return exec;
}

extern "C" void txl_cuda_graph_launch(void *graph) {
  CUDA_CHECK(cudaGraphLaunch(static_cast<cudaGraphExec_t>(graph), txl_cuda_stream()));
}

extern "C" void txl_cuda_graph_destroy(void *graph) {
  if (graph) CUDA_CHECK(cudaGraphExecDestroy(static_cast<cudaGraphExec_t>(graph)));
}

extern "C" int txl_cuda_capturing(void) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  CUDA_CHECK(cudaStreamIsCapturing(txl_cuda_stream(), &status));
  return status != cudaStreamCaptureStatusNone;
}

extern "C" long txl_cuda_graph_launches(void) {
#ifdef TXL_CUDA_EMU
  long launches = 0, kernels = 0;
  txl_emu_graph_counts(&launches, &kernels);
  return launches;
#else
  return -1; /* not counted on a GPU (as txl_cuda_api_counts) */
#endif
}
