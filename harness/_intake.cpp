// LoadGen's front door in native code: the SystemUnderTest that LoadGen's issue thread calls.
//
// Why: with a Python SUT, every IssueQuery makes LoadGen's issue thread take the GIL, turn each
// sample into a Python object and run Python code, while the harness's own threads hold the GIL for
// up to the 5 ms switch interval. The issue thread then falls behind its Poisson schedule and the
// Server run fails its latency bound long before the harness is busy. Here IssueQuery only appends
// the samples to a queue under a mutex: LoadGen's thread never touches Python. The harness's intake
// thread takes them out in bulk (the GIL released while it waits), as two flat arrays.
//
// The object is handed to LoadGen through the Python binding's StartTest, which takes a SUT as an
// address and calls it through LoadGen's public C++ interface (loadgen/system_under_test.h): a class
// with a virtual destructor and the virtual methods Name, IssueQuery and FlushQueries, in that order.
// The declaration below is that interface, so the vtable LoadGen calls through is this one.

#include "_buffer.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

namespace mlperf {
struct QuerySample {  // loadgen/query_sample.h: a response id and a QSL sample index
  uintptr_t id;
  size_t index;
};

class SystemUnderTest {  // loadgen/system_under_test.h
 public:
  virtual ~SystemUnderTest() {}
  virtual const std::string& Name() = 0;
  virtual void IssueQuery(const std::vector<QuerySample>& samples) = 0;
  virtual void FlushQueries() = 0;
};
}  // namespace mlperf

namespace {

using Clock = std::chrono::steady_clock;

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::max(0.0, s)));
}

class Intake final : public mlperf::SystemUnderTest {
 public:
  const std::string& Name() override { return name_; }

  void IssueQuery(const std::vector<mlperf::QuerySample>& samples) override {
    Append(samples.data(), samples.size());
  }

  void FlushQueries() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      flushed_ = true;
    }
    cv_.notify_all();
  }

  void Append(const mlperf::QuerySample* samples, size_t n) {
    if (n == 0) return;
    bool wake;
    {
      std::lock_guard<std::mutex> lock(mu_);
      size_t before = pending_.size() - head_;
      pending_.insert(pending_.end(), samples, samples + n);
      arrivals_.emplace_back(pending_.size(), Clock::now());
      issued_ += n;
      // the taker needs to know of a first sample (its deadline starts) or of a batch that is now full
      wake = before == 0 || pending_.size() - head_ >= want_;
    }
    if (wake) cv_.notify_one();
  }

  // Up to `cap` samples into ids/indices once `min_n` are waiting (then a multiple of min_n: whole
  // batches), or the oldest waiting sample is `max_wait` old, or queries were flushed, or the intake
  // closed, or (pokeable) Poke was called; 0 after `timeout` with nothing ready.
  size_t Take(uint64_t* ids, int64_t* indices, size_t cap, size_t min_n, double max_wait, double timeout,
              bool pokeable) {
    std::unique_lock<std::mutex> lock(mu_);
    const Clock::time_point give_up = Clock::now() + seconds(timeout);
    const Clock::duration wait = seconds(max_wait);
    min_n = std::max<size_t>(1, std::min(min_n, cap));
    bool whole = false;  // ready because min_n wait: take whole multiples of min_n (full batches) only
    for (;;) {
      size_t avail = pending_.size() - head_;
      if (closed_ || (avail > 0 && flushed_) || (pokeable && poked_)) break;
      if (avail >= min_n) {
        whole = true;
        break;
      }
      Clock::time_point now = Clock::now(), until = give_up;
      if (avail > 0) {
        Clock::time_point due = OldestArrival() + wait;
        if (now >= due) break;
        until = std::min(until, due);
      }
      if (now >= give_up) return 0;  // nothing ready: the samples stay for the next call
      want_ = min_n;
      cv_.wait_until(lock, until);
      want_ = 1;
    }
    if (pokeable) poked_ = false;
    size_t n = std::min(pending_.size() - head_, cap);
    if (whole) n -= n % min_n;
    for (size_t i = 0; i < n; ++i) {
      ids[i] = pending_[head_ + i].id;
      indices[i] = static_cast<int64_t>(pending_[head_ + i].index);
    }
    head_ += n;
    while (!arrivals_.empty() && arrivals_.front().first <= head_) arrivals_.pop_front();
    if (head_ == pending_.size()) {
      pending_.clear();
      head_ = 0;
      arrivals_.clear();
      flushed_ = false;
    } else if (head_ > (1u << 16) && head_ * 2 > pending_.size()) {  // drop the consumed front now and then
      pending_.erase(pending_.begin(), pending_.begin() + static_cast<std::ptrdiff_t>(head_));
      for (auto& a : arrivals_) a.first -= head_;
      head_ = 0;
    }
    return n;
  }

  // Wake a pokeable Take now, or make the next one return at once; Unpoke forgets an earlier poke.
  void Poke(bool on) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      poked_ = on;
    }
    if (on) cv_.notify_all();
  }

  void Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    cv_.notify_all();
  }

  size_t Waiting() {
    std::lock_guard<std::mutex> lock(mu_);
    return pending_.size() - head_;
  }

  uint64_t Issued() {
    std::lock_guard<std::mutex> lock(mu_);
    return issued_;
  }

 private:
  // The arrival of the chunk holding the first waiting sample: Take pops every chunk it has consumed,
  // so while samples wait it is the front one.
  Clock::time_point OldestArrival() const { return arrivals_.empty() ? Clock::now() : arrivals_.front().second; }

  std::string name_{"mlperf-appliance"};
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<mlperf::QuerySample> pending_;
  std::deque<std::pair<size_t, Clock::time_point>> arrivals_;  // (end of a chunk in pending_, its arrival)
  size_t head_ = 0;
  size_t want_ = 1;
  uint64_t issued_ = 0;
  bool flushed_ = false;
  bool poked_ = false;
  bool closed_ = false;
};

struct IntakeObject {
  PyObject_HEAD Intake* intake;
};

PyObject* intake_new(PyTypeObject* type, PyObject*, PyObject*) {
  auto* self = reinterpret_cast<IntakeObject*>(type->tp_alloc(type, 0));
  if (self != nullptr) self->intake = new Intake();
  return reinterpret_cast<PyObject*>(self);
}

void intake_dealloc(IntakeObject* self) {
  delete self->intake;
  Py_TYPE(self)->tp_free(reinterpret_cast<PyObject*>(self));
}


PyObject* intake_take(IntakeObject* self, PyObject* args) {
  PyObject *ids_obj, *idx_obj;
  Py_ssize_t min_n;
  double max_wait, timeout;
  int pokeable = 0;
  if (!PyArg_ParseTuple(args, "OOndd|p", &ids_obj, &idx_obj, &min_n, &max_wait, &timeout, &pokeable)) return nullptr;
  Py_buffer ids, idx;
  if (!contiguous_buffer(ids_obj, &ids, PyBUF_WRITABLE, true, "ids")) return nullptr;
  if (!contiguous_buffer(idx_obj, &idx, PyBUF_WRITABLE, true, "indices")) {
    PyBuffer_Release(&ids);
    return nullptr;
  }
  size_t cap = static_cast<size_t>(std::min(ids.len, idx.len) / 8);
  size_t n = 0;
  Py_BEGIN_ALLOW_THREADS
  n = self->intake->Take(static_cast<uint64_t*>(ids.buf), static_cast<int64_t*>(idx.buf), cap,
                         static_cast<size_t>(std::max<Py_ssize_t>(min_n, 0)), max_wait, timeout,
                         pokeable != 0);
  Py_END_ALLOW_THREADS
  PyBuffer_Release(&ids);
  PyBuffer_Release(&idx);
  return PyLong_FromSize_t(n);
}

PyObject* intake_push(IntakeObject* self, PyObject* args) {
  PyObject *ids_obj, *idx_obj;
  if (!PyArg_ParseTuple(args, "OO", &ids_obj, &idx_obj)) return nullptr;
  Py_buffer ids, idx;
  if (!contiguous_buffer(ids_obj, &ids, 0, true, "ids")) return nullptr;
  if (!contiguous_buffer(idx_obj, &idx, 0, true, "indices")) {
    PyBuffer_Release(&ids);
    return nullptr;
  }
  if (ids.len != idx.len) {
    PyBuffer_Release(&ids);
    PyBuffer_Release(&idx);
    PyErr_SetString(PyExc_ValueError, "ids and indices differ in length");
    return nullptr;
  }
  std::vector<mlperf::QuerySample> samples(static_cast<size_t>(ids.len / 8));
  for (size_t i = 0; i < samples.size(); ++i)
    samples[i] = {static_cast<uintptr_t>(static_cast<const uint64_t*>(ids.buf)[i]),
                  static_cast<size_t>(static_cast<const int64_t*>(idx.buf)[i])};
  PyBuffer_Release(&ids);
  PyBuffer_Release(&idx);
  Py_BEGIN_ALLOW_THREADS
  self->intake->IssueQuery(samples);
  Py_END_ALLOW_THREADS
  Py_RETURN_NONE;
}

PyObject* intake_flush(IntakeObject* self, PyObject*) {
  self->intake->FlushQueries();
  Py_RETURN_NONE;
}

PyObject* intake_poke(IntakeObject* self, PyObject*) {
  self->intake->Poke(true);
  Py_RETURN_NONE;
}

PyObject* intake_unpoke(IntakeObject* self, PyObject*) {
  self->intake->Poke(false);
  Py_RETURN_NONE;
}

PyObject* intake_close(IntakeObject* self, PyObject*) {
  self->intake->Close();
  Py_RETURN_NONE;
}

PyObject* intake_handle(IntakeObject* self, void*) {
  return PyLong_FromVoidPtr(static_cast<mlperf::SystemUnderTest*>(self->intake));
}

PyObject* intake_waiting(IntakeObject* self, void*) { return PyLong_FromSize_t(self->intake->Waiting()); }

PyObject* intake_issued(IntakeObject* self, void*) {
  return PyLong_FromUnsignedLongLong(self->intake->Issued());
}

PyMethodDef intake_methods[] = {
    {"take", reinterpret_cast<PyCFunction>(intake_take), METH_VARARGS,
     "take(ids, indices, min_n, max_wait_s, timeout_s, pokeable=False) -> n\n\n"
     "Move up to len(ids) waiting samples into ids (uint64) and indices (int64) once min_n wait (then a\n"
     "multiple of min_n: whole batches), the oldest has waited max_wait_s, queries were flushed, the\n"
     "intake closed or (pokeable) poke() was called; 0 after timeout_s with nothing ready. The GIL is\n"
     "released while it waits."},
    {"poke", reinterpret_cast<PyCFunction>(intake_poke), METH_NOARGS,
     "Wake a pokeable take now (or make the next one return at once)."},
    {"unpoke", reinterpret_cast<PyCFunction>(intake_unpoke), METH_NOARGS, "Forget an earlier poke."},
    {"push", reinterpret_cast<PyCFunction>(intake_push), METH_VARARGS,
     "push(ids, indices): issue samples from Python, as LoadGen's IssueQuery does."},
    {"flush", reinterpret_cast<PyCFunction>(intake_flush), METH_NOARGS,
     "As LoadGen's FlushQueries: what waits goes out without waiting for a full batch."},
    {"close", reinterpret_cast<PyCFunction>(intake_close), METH_NOARGS, "Wake every taker for good."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef intake_getset[] = {
    {"handle", reinterpret_cast<getter>(intake_handle), nullptr,
     "The SUT's address for mlperf_loadgen.StartTest (owned by this object: never DestroySUT it).", nullptr},
    {"waiting", reinterpret_cast<getter>(intake_waiting), nullptr, "Samples issued and not yet taken.", nullptr},
    {"issued", reinterpret_cast<getter>(intake_issued), nullptr, "Samples issued so far.", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyTypeObject IntakeType = {PyVarObject_HEAD_INIT(nullptr, 0)};

PyModuleDef module = {PyModuleDef_HEAD_INIT, "harness._intake",
                      "LoadGen's SystemUnderTest in native code: IssueQuery queues samples without the GIL.", -1,
                      nullptr};

}  // namespace

PyMODINIT_FUNC PyInit__intake(void) {
  IntakeType.tp_name = "harness._intake.Intake";
  IntakeType.tp_doc = "A LoadGen SystemUnderTest whose IssueQuery queues the samples for the harness to take.";
  IntakeType.tp_basicsize = sizeof(IntakeObject);
  IntakeType.tp_flags = Py_TPFLAGS_DEFAULT;
  IntakeType.tp_new = intake_new;
  IntakeType.tp_dealloc = reinterpret_cast<destructor>(intake_dealloc);
  IntakeType.tp_methods = intake_methods;
  IntakeType.tp_getset = intake_getset;
  if (PyType_Ready(&IntakeType) < 0) return nullptr;
  PyObject* m = PyModule_Create(&module);
  if (m == nullptr) return nullptr;
  Py_INCREF(&IntakeType);
  if (PyModule_AddObject(m, "Intake", reinterpret_cast<PyObject*>(&IntakeType)) < 0) {
    Py_DECREF(&IntakeType);
    Py_DECREF(m);
    return nullptr;
  }
  return m;
}
