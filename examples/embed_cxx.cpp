// clattn from C++: the context owned by a std::unique_ptr, the buffers filled
// from std::vector, a GQA decode over sequences of different lengths checked
// against a double-precision loop, and the library's version against the
// header's. Exits 1 on any failure.
// Build: c++ -std=c++11 embed_cxx.cpp $(pkg-config --cflags --libs clattn)
#include <clattn.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <vector>

namespace {

struct context_release {
  void operator()(clattn_context *ctx) const { clattn_context_release(&ctx); }
};
using context_ptr = std::unique_ptr<clattn_context, context_release>;

struct mem {
  cl_mem m = nullptr;
  explicit mem(cl_mem m_) : m(m_) {}
  mem(const mem &) = delete;
  mem &operator=(const mem &) = delete;
  ~mem() {
    if (m) clReleaseMemObject(m);
  }
};

const int B = 3, HQ = 8, HKV = 2, D = 64, CTX = 100;
const int32_t kv_len[B] = {100, 1, 37};

// Deterministic values in [-1, 1): the same on every run and platform.
std::vector<float> values(size_t n, unsigned seed) {
  std::vector<float> x(n);
  for (size_t i = 0; i < n; i++) x[i] = (float)((i * 2654435761u + seed * 40503u) % 2000u) / 1000.0f - 1.0f;
  return x;
}

int fail(const char *what, clattn_status s) {
  std::fprintf(stderr, "%s: %s: %s\n", what, clattn_status_string(s), clattn_last_error());
  return 1;
}

}  // namespace

int main() {
  int major = -1, minor = -1, patch = -1;
  const char *version = clattn_version(&major, &minor, &patch);
  std::printf("clattn %s (header %d.%d.%d)\n", version, CLATTN_VERSION_MAJOR, CLATTN_VERSION_MINOR,
              CLATTN_VERSION_PATCH);
  if (major != CLATTN_VERSION_MAJOR || minor != CLATTN_VERSION_MINOR || patch != CLATTN_VERSION_PATCH) {
    std::fprintf(stderr, "the library is not the version of the header it was built with\n");
    return 1;
  }

  clattn_context *raw = nullptr;
  clattn_status s = clattn_context_create_default(nullptr, &raw);  // $CLATTN_DEVICE, else the first GPU
  if (s != CLATTN_SUCCESS) return fail("clattn_context_create_default", s);
  context_ptr attn(raw);
  cl_context cl = clattn_context_cl(attn.get());
  cl_device_id dev = clattn_context_device(attn.get());
  cl_int err = CL_SUCCESS;
  cl_command_queue queue = clCreateCommandQueue(cl, dev, 0, &err);
  if (err != CL_SUCCESS) {
    std::fprintf(stderr, "clCreateCommandQueue: %d\n", err);
    return 1;
  }

  std::vector<float> q = values((size_t)B * HQ * D, 1), k = values((size_t)B * CTX * HKV * D, 2),
                     v = values((size_t)B * CTX * HKV * D, 3), o((size_t)B * HQ * D, 0.0f);
  auto upload = [&](std::vector<float> &host) {
    return clCreateBuffer(cl, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, host.size() * sizeof(float),
                          host.data(), nullptr);
  };
  mem qm(upload(q)), km(upload(k)), vm(upload(v)), om(upload(o));
  mem lenm(clCreateBuffer(cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof kv_len,
                          const_cast<int32_t *>(kv_len), nullptr));

  clattn_decode_params p = clattn_decode_params();  // zero: every optional input absent
  p.q = clattn_tensor_4d(qm.m, 0, CLATTN_F32, B, 1, HQ, D);
  p.k = clattn_tensor_4d(km.m, 0, CLATTN_F32, B, CTX, HKV, D);
  p.v = clattn_tensor_4d(vm.m, 0, CLATTN_F32, B, CTX, HKV, D);
  p.o = clattn_tensor_4d(om.m, 0, CLATTN_F32, B, 1, HQ, D);
  p.maybe_kv_len = clattn_tensor_1d(lenm.m, 0, CLATTN_I32, B);
  cl_event done = nullptr;
  s = clattn_decode(attn.get(), queue, &p, 0, nullptr, &done);
  if (s != CLATTN_SUCCESS) return fail("clattn_decode", s);
  err = clEnqueueReadBuffer(queue, om.m, CL_TRUE, 0, o.size() * sizeof(float), o.data(), 1, &done, nullptr);
  clReleaseEvent(done);
  clReleaseCommandQueue(queue);
  if (err != CL_SUCCESS) {
    std::fprintf(stderr, "clEnqueueReadBuffer: %d\n", err);
    return 1;
  }

  // softmax(q . k / sqrt(D)) v over each sequence's kv_len keys, in double
  double max_err = 0;
  for (int b = 0; b < B; b++)
    for (int h = 0; h < HQ; h++) {
      const int g = h / (HQ / HKV);
      const float *qr = &q[((size_t)b * HQ + h) * D];
      std::vector<double> score(kv_len[b]);
      double top = -INFINITY, sum = 0;
      for (int j = 0; j < kv_len[b]; j++) {
        const float *kr = &k[(((size_t)b * CTX + j) * HKV + g) * D];
        double dot = 0;
        for (int d = 0; d < D; d++) dot += (double)qr[d] * kr[d];
        score[j] = dot / std::sqrt((double)D);
        top = std::fmax(top, score[j]);
      }
      for (int j = 0; j < kv_len[b]; j++) sum += score[j] = std::exp(score[j] - top);
      for (int d = 0; d < D; d++) {
        double want = 0;
        for (int j = 0; j < kv_len[b]; j++) want += score[j] / sum * v[(((size_t)b * CTX + j) * HKV + g) * D + d];
        max_err = std::fmax(max_err, std::fabs(o[((size_t)b * HQ + h) * D + d] - want));
      }
    }
  // f32 scores and sums over at most 100 keys of |q.k| <= 64: well under 1e-4
  const double tol = 1e-4;
  std::printf("decode B=%d Hq=%d Hkv=%d D=%d kv_len=%d,%d,%d: max abs error %.3g (tolerance %g): %s\n", B, HQ,
              HKV, D, kv_len[0], kv_len[1], kv_len[2], max_err, tol, max_err <= tol ? "PASS" : "FAIL");
  return max_err <= tol ? 0 : 1;
}
