package v1alpha1

import (
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// fill sets every settable field of v to a non-zero value, two elements per
// slice and map, so that tests notice fields a hand-written function forgot.
func fill(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	switch v.Kind() {
	case reflect.String:
		v.SetString("x-" + path)
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(t, v.Elem(), path)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(t, v.Index(i), path)
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for _, k := range []string{"a", "b"} {
			e := reflect.New(v.Type().Elem()).Elem()
			fill(t, e, path)
			v.SetMapIndex(reflect.ValueOf(k).Convert(v.Type().Key()), e)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[metav1.Time]() {
			v.Set(reflect.ValueOf(metav1.NewTime(time.Date(2026, 11, 30, 9, 0, 0, 0, time.UTC))))
			return
		}
		for i := range v.NumField() {
			if f := v.Type().Field(i); f.IsExported() {
				fill(t, v.Field(i), path+"."+f.Name)
			}
		}
	case reflect.Interface, reflect.Func, reflect.Chan:
		// Not part of API types; metav1 fields of these kinds stay nil.
	default:
		t.Fatalf("fill: unhandled kind %s at %s", v.Kind(), path)
	}
}

// shares reports the first pointer, slice or map reachable from both a and b
// at the same path, i.e. memory a deep copy should not share.
func shares(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		return shares(a.Elem(), b.Elem(), path)
	case reflect.Slice:
		if a.Len() == 0 || b.Len() == 0 {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		for i := range min(a.Len(), b.Len()) {
			if p := shares(a.Index(i), b.Index(i), path); p != "" {
				return p
			}
		}
	case reflect.Map:
		if !a.IsNil() && a.Pointer() == b.Pointer() {
			return path
		}
	case reflect.Struct:
		for i := range a.NumField() {
			if p := shares(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); p != "" {
				return p
			}
		}
	}
	return ""
}

func TestDeepCopy(t *testing.T) {
	tests := []struct {
		name string
		obj  runtime.Object
	}{
		{"NodeReport", &NodeReport{}},
		{"NodeReportList", &NodeReportList{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fill(t, reflect.ValueOf(tt.obj).Elem(), tt.name)
			cp := tt.obj.DeepCopyObject()
			if !reflect.DeepEqual(tt.obj, cp) {
				t.Fatalf("copy differs from the original:\n%#v\n%#v", tt.obj, cp)
			}
			if p := shares(reflect.ValueOf(tt.obj), reflect.ValueOf(cp), tt.name); p != "" {
				t.Errorf("copy shares memory with the original at %s", p)
			}
		})
	}
	var nilReport *NodeReport
	if nilReport.DeepCopy() != nil {
		t.Error("DeepCopy of a nil *NodeReport is not nil")
	}
}

func TestAddToScheme(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatal(err)
	}
	for _, obj := range []runtime.Object{&NodeReport{}, &NodeReportList{}} {
		gvks, _, err := s.ObjectKinds(obj)
		if err != nil {
			t.Fatal(err)
		}
		if gvks[0].GroupVersion() != SchemeGroupVersion {
			t.Errorf("%T registered as %v, want %v", obj, gvks[0], SchemeGroupVersion)
		}
	}
	if gvk, _, _ := s.ObjectKinds(&NodeReport{}); gvk[0].Kind != Kind {
		t.Errorf("kind = %q, want %q", gvk[0].Kind, Kind)
	}
}
