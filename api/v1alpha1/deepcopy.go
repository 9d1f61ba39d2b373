package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Hand-written deep copies: the types are few and mostly value types, so a
// code generator (controller-gen) is not worth its dependency tree.
// TestDeepCopy fills every field by reflection and checks that a copy shares
// no memory with the original, so a new pointer or slice field without a
// copy here fails the tests.

// DeepCopyInto copies r into out.
func (r *Report) DeepCopyInto(out *Report) {
	*out = *r
	r.ObservedAt.DeepCopyInto(&out.ObservedAt)
	r.Facts.DeepCopyInto(&out.Facts)
	if r.Platforms != nil {
		out.Platforms = make([]PlatformVerdict, len(r.Platforms))
		copy(out.Platforms, r.Platforms)
	}
	if r.Findings != nil {
		out.Findings = make([]Finding, len(r.Findings))
		copy(out.Findings, r.Findings)
	}
	if r.Install != nil {
		out.Install = r.Install.DeepCopy()
	}
	if r.GPUResources != nil {
		out.GPUResources = make([]GPUResource, len(r.GPUResources))
		copy(out.GPUResources, r.GPUResources)
	}
}

// DeepCopyInto copies s into out.
func (s *InstallStatus) DeepCopyInto(out *InstallStatus) {
	*out = *s
	s.Time.DeepCopyInto(&out.Time)
	if s.Platforms != nil {
		out.Platforms = make([]PlatformInstall, len(s.Platforms))
		copy(out.Platforms, s.Platforms)
	}
}

// DeepCopy returns a deep copy of s.
func (s *InstallStatus) DeepCopy() *InstallStatus {
	if s == nil {
		return nil
	}
	out := new(InstallStatus)
	s.DeepCopyInto(out)
	return out
}

// DeepCopy returns a deep copy of r.
func (r *Report) DeepCopy() *Report {
	if r == nil {
		return nil
	}
	out := new(Report)
	r.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies f into out.
func (f *FactsSummary) DeepCopyInto(out *FactsSummary) {
	*out = *f
	f.TEE.DeepCopyInto(&out.TEE)
	if f.GPUs != nil {
		out.GPUs = make([]GPUSummary, len(f.GPUs))
		copy(out.GPUs, f.GPUs)
	}
}

// DeepCopyInto copies t into out.
func (t *TEESummary) DeepCopyInto(out *TEESummary) {
	*out = *t
	if t.SNP != nil {
		snp := *t.SNP
		out.SNP = &snp
	}
	if t.TDX != nil {
		tdx := *t.TDX
		out.TDX = &tdx
	}
}

// DeepCopyInto copies n into out.
func (n *NodeReport) DeepCopyInto(out *NodeReport) {
	*out = *n
	out.TypeMeta = n.TypeMeta
	n.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	n.Report.DeepCopyInto(&out.Report)
	n.Status.DeepCopyInto(&out.Status)
}

// DeepCopy returns a deep copy of s.
func (s *NodeReportStatus) DeepCopy() *NodeReportStatus {
	if s == nil {
		return nil
	}
	out := new(NodeReportStatus)
	s.DeepCopyInto(out)
	return out
}

// DeepCopyInto copies s into out.
func (s *NodeReportStatus) DeepCopyInto(out *NodeReportStatus) {
	*out = *s
	if s.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(s.Conditions))
		for i := range s.Conditions {
			s.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
}

// DeepCopy returns a deep copy of n.
func (n *NodeReport) DeepCopy() *NodeReport {
	if n == nil {
		return nil
	}
	out := new(NodeReport)
	n.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (n *NodeReport) DeepCopyObject() runtime.Object {
	if c := n.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies l into out.
func (l *NodeReportList) DeepCopyInto(out *NodeReportList) {
	*out = *l
	out.TypeMeta = l.TypeMeta
	l.ListMeta.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]NodeReport, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a deep copy of l.
func (l *NodeReportList) DeepCopy() *NodeReportList {
	if l == nil {
		return nil
	}
	out := new(NodeReportList)
	l.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (l *NodeReportList) DeepCopyObject() runtime.Object {
	if c := l.DeepCopy(); c != nil {
		return c
	}
	return nil
}
