// Shared by the package's C++ extensions (_intake.cpp, _copy.cpp): numpy arrays as raw buffers.
#pragma once

#ifndef PY_SSIZE_T_CLEAN
#define PY_SSIZE_T_CLEAN
#endif
#include <Python.h>

// A C-contiguous view of `obj` (extra `flags`: PyBUF_WRITABLE, PyBUF_ND); with `int64`, its items must be
// 8 bytes (numpy int64 / uint64 arrays). On failure: a Python error set, false returned, nothing held.
inline bool contiguous_buffer(PyObject* obj, Py_buffer* view, int flags, bool int64, const char* what) {
  if (PyObject_GetBuffer(obj, view, flags | PyBUF_C_CONTIGUOUS | PyBUF_FORMAT) < 0) return false;
  if (int64 && view->itemsize != 8) {
    PyBuffer_Release(view);
    PyErr_Format(PyExc_TypeError, "%s must hold 8-byte integers", what);
    return false;
  }
  return true;
}
