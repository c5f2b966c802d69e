// unique_ptr owners for OpenSSL objects, each freed by its own function:
// OpensslPtr<X509, X509_free>. The serving certificate code and its tests
// hold every OpenSSL object in one, so no error path leaks. Header-only.
#ifndef KUBETRAIN_OPERATOR_KUBE_OPENSSL_PTR_H_
#define KUBETRAIN_OPERATOR_KUBE_OPENSSL_PTR_H_

#include <memory>

namespace kubetrain::kube {

// `Free` may return a value (BIO_free's int), which is dropped.
template <auto Free>
struct OpensslFree {
  template <typename T>
  void operator()(T* p) const {
    (void)Free(p);
  }
};

template <typename T, auto Free>
using OpensslPtr = std::unique_ptr<T, OpensslFree<Free>>;

}  // namespace kubetrain::kube

#endif  // KUBETRAIN_OPERATOR_KUBE_OPENSSL_PTR_H_
