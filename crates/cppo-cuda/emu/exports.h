// The C interface of the emulation library: kernels by index, each with the signature of its C++
// parameters (so the host's declared signature is checked against the source), launched from an
// array of argument pointers exactly as cuLaunchKernel takes them.
#pragma once
#include <cstddef>
#include <string>
#include <utility>

namespace emu {

template <typename T> constexpr char sig_char() {
    if constexpr (std::is_pointer<T>::value) return 'p';
    else if constexpr (std::is_same<T, int>::value) return 'i';
    else if constexpr (std::is_same<T, long long>::value) return 'l';
    else if constexpr (std::is_same<T, float>::value) return 'f';
    else if constexpr (std::is_same<T, double>::value) return 'd';
    else return '?';
}

template <typename F, F K> struct Invoker;
template <typename... A, void (*K)(A...)> struct Invoker<void (*)(A...), K> {
    template <std::size_t... I> static void call(void** args, std::index_sequence<I...>) {
        K(*static_cast<typename std::remove_cv<A>::type*>(args[I])...);
    }
    static void body(void* ctx) { call(static_cast<void**>(ctx), std::index_sequence_for<A...>{}); }
    static const char* sig() {
        static const char s[] = {sig_char<typename std::remove_cv<A>::type>()..., 0};
        return s;
    }
};

struct Entry {
    const char* name;
    void (*body)(void*);
    const char* (*sig)();
};

}  // namespace emu

#define EMU_ENTRY(k) emu::Entry{#k, &emu::Invoker<decltype(&k), &k>::body, &emu::Invoker<decltype(&k), &k>::sig}

#define EMU_EXPORTS(table)                                                                              \
    extern "C" int cppo_emu_count() { return (int)(sizeof(table) / sizeof(table[0])); }                  \
    extern "C" const char* cppo_emu_name(int i) { return table[i].name; }                               \
    extern "C" const char* cppo_emu_sig(int i) { return table[i].sig(); }                               \
    extern "C" int cppo_emu_launch(int i, const unsigned* grid, const unsigned* block, size_t shared,   \
                                   void** args, char* err, size_t err_len) {                            \
        dim3 g{grid[0], grid[1], grid[2]}, b{block[0], block[1], block[2]};                              \
        std::string e = emu::launch(g, b, shared, table[i].body, args);                                 \
        if (e.empty()) return 0;                                                                         \
        std::snprintf(err, err_len, "%s", e.c_str());                                                    \
        return 1;                                                                                        \
    }
