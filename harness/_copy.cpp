// Batch assembly in native code: rows of a sample replica copied into a card's staging buffer.
//
// Why: at 20+ GB/s a batch of eight ResNet50 samples (1.2 MB) copies in about 55 us, and the numpy
// calls around it (index lookup, checks, slicing, np.take) cost 7-17% of that (tools/bench_copy.py),
// all of it holding the GIL that the other cards' threads wait for. Here one call looks the samples up,
// checks them, and copies with the GIL released: one memcpy per run of consecutive rows (a contiguous
// batch is one memcpy), glibc's vectorised memcpy (the paper's AVX2 copy, chosen by glibc per CPU).

#include "_buffer.h"

#include <cstdint>
#include <cstring>

namespace {

struct Views {  // releases whatever it got, however the call ends
  Py_buffer v[4];
  int n = 0;
  ~Views() {
    for (int i = 0; i < n; ++i) PyBuffer_Release(&v[i]);
  }
};

PyObject* gather(PyObject*, PyObject* args) {
  PyObject *src_obj, *slot_obj, *idx_obj, *dst_obj;
  if (!PyArg_ParseTuple(args, "OOOO", &src_obj, &slot_obj, &idx_obj, &dst_obj)) return nullptr;
  Views views;
  if (!contiguous_buffer(src_obj, &views.v[0], PyBUF_ND, false, "src")) return nullptr;
  views.n = 1;
  if (!contiguous_buffer(slot_obj, &views.v[1], 0, true, "slot_of")) return nullptr;
  views.n = 2;
  if (!contiguous_buffer(idx_obj, &views.v[2], 0, true, "indices")) return nullptr;
  views.n = 3;
  if (!contiguous_buffer(dst_obj, &views.v[3], PyBUF_WRITABLE, false, "dst")) return nullptr;
  views.n = 4;
  const Py_buffer &src = views.v[0], &slot = views.v[1], &idx = views.v[2], &dst = views.v[3];
  if (src.ndim < 1 || src.shape[0] == 0) {
    PyErr_SetString(PyExc_ValueError, "src must hold at least one row");
    return nullptr;
  }
  const Py_ssize_t rows = src.shape[0];
  const Py_ssize_t row_bytes = src.len / rows;
  const auto* slot_of = static_cast<const int64_t*>(slot.buf);
  const auto* indices = static_cast<const int64_t*>(idx.buf);
  const Py_ssize_t mapped = slot.len / 8, n = idx.len / 8;
  if (n * row_bytes > dst.len) {
    PyErr_Format(PyExc_ValueError, "dst holds %zd bytes, %zd rows of %zd need more", dst.len, n, row_bytes);
    return nullptr;
  }
  for (Py_ssize_t j = 0; j < n; ++j) {  // every sample checked before any byte moves
    const int64_t i = indices[j];
    if (i < 0 || i >= mapped) {
      PyErr_Format(PyExc_IndexError, "sample index %lld is outside the sample library (%zd samples)",
                   static_cast<long long>(i), mapped);
      return nullptr;
    }
    const int64_t s = slot_of[i];
    if (s < 0 || s >= rows) {
      PyErr_Format(PyExc_LookupError, "%lld", static_cast<long long>(i));
      return nullptr;
    }
  }
  const auto* from = static_cast<const char*>(src.buf);
  auto* to = static_cast<char*>(dst.buf);
  Py_BEGIN_ALLOW_THREADS
  for (Py_ssize_t j = 0; j < n;) {
    const int64_t first = slot_of[indices[j]];
    Py_ssize_t k = j + 1;
    while (k < n && slot_of[indices[k]] == first + (k - j)) ++k;  // a run of consecutive rows
    std::memcpy(to + j * row_bytes, from + first * row_bytes, static_cast<size_t>((k - j) * row_bytes));
    j = k;
  }
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

PyMethodDef methods[] = {
    {"gather", gather, METH_VARARGS,
     "gather(src, slot_of, indices, dst): copy row slot_of[i] of src for each i in indices into consecutive\n"
     "rows of dst, the GIL released. Raises IndexError for an index outside slot_of and LookupError(index)\n"
     "for one whose slot is negative (not loaded); nothing is copied then."},
    {nullptr, nullptr, 0, nullptr}};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "harness._copy", "Batch assembly (see harness/_copy.cpp).", -1,
                      methods};

}  // namespace

PyMODINIT_FUNC PyInit__copy(void) { return PyModule_Create(&module); }
