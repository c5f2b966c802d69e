// Server-side printing for the test Kubernetes API emulator: the meta.k8s.io/v1
// Table kube-apiserver answers when a client (kubectl get) asks for
// `application/json;as=Table;v=v1;g=meta.k8s.io`. Custom resources get a Name
// column and their CRD's additionalPrinterColumns (JSONPath: `.a.b`, `[n]`,
// `[-1:]`; dates shown as ages like "5m", as the real server does); pods get
// Name, Ready, Status, Restarts, Age, IP, Node, Nominated Node, Readiness
// Gates as kube-apiserver v1.20 prints them; other resources Name and Age.
// Rows carry the object's metadata (PartialObjectMetadata, includeObject's
// default). Pure functions; thread-safe.
#ifndef KUBETRAIN_TESTING_KUBE_EMULATOR_TABLE_H_
#define KUBETRAIN_TESTING_KUBE_EMULATOR_TABLE_H_

#include <string>

#include "absl/time/time.h"
#include "testing/kube_emulator_discovery.h"
#include "testing/kube_emulator_store.h"

namespace kubetrain::testing {

// True when the Accept header asks for a meta.k8s.io/v1 Table.
bool WantsTable(const std::string& accept);

// `answer` (a list or one object, as the store answered it) as a Table.
// `columns` are the resource's printer columns (custom resources).
OrderedJson ToTable(const ResourceType& rt, const OrderedJson& answer,
                    const std::vector<PrinterColumn>& columns, absl::Time now);

// The value at a printer column's JSONPath in `object`; null when absent.
OrderedJson JsonPathValue(const OrderedJson& object, const std::string& path);

// kubectl's age format (k8s.io/apimachinery duration.HumanDuration).
std::string HumanDuration(absl::Duration d);

}  // namespace kubetrain::testing

#endif  // KUBETRAIN_TESTING_KUBE_EMULATOR_TABLE_H_
