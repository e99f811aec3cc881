//! Property tests of the pure algorithms of model I/O against brute force.

use candle_core::{Device, Tensor};
use cppo_io::chat_template::pyjson::{dumps, python_float_repr, PyJsonStyle};
use cppo_io::chat_template::strftime::{civil_from_days, civil_time, is_leap};
use cppo_io::gguf::reverse_llama_rotary_permutation;
use cppo_io::gguf::tokenizer::byte_to_char;
use proptest::prelude::*;

proptest! {
    /// Undoing llama.cpp's permutation puts GGUF row `h*2*half + 2*i + j` back at `h*2*half + j*half + i`.
    #[test]
    fn reverse_permutation_matches_index_arithmetic(n_head in 1usize..6, half in 1usize..6, cols in 1usize..5) {
        let rows = n_head * 2 * half;
        let gguf: Vec<f32> = (0..rows * cols).map(|x| x as f32).collect();
        let t = Tensor::from_vec(gguf.clone(), (rows, cols), &Device::Cpu).unwrap();
        let hf = reverse_llama_rotary_permutation(&t, n_head).unwrap().flatten_all().unwrap().to_vec1::<f32>().unwrap();
        for h in 0..n_head {
            for j in 0..2 {
                for i in 0..half {
                    let hf_row = h * 2 * half + j * half + i;
                    let gguf_row = h * 2 * half + 2 * i + j;
                    for c in 0..cols {
                        prop_assert_eq!(hf[hf_row * cols + c], gguf[gguf_row * cols + c]);
                    }
                }
            }
        }
    }

    /// Biases (one dimension) follow the same permutation.
    #[test]
    fn reverse_permutation_of_a_bias(n_head in 1usize..6, half in 1usize..6) {
        let rows = n_head * 2 * half;
        let t = Tensor::from_vec((0..rows).map(|x| x as f32).collect::<Vec<_>>(), rows, &Device::Cpu).unwrap();
        let hf = reverse_llama_rotary_permutation(&t, n_head).unwrap().to_vec1::<f32>().unwrap();
        for h in 0..n_head { for j in 0..2 { for i in 0..half {
            prop_assert_eq!(hf[h * 2 * half + j * half + i], (h * 2 * half + 2 * i + j) as f32);
        }}}
    }

    /// The calendar of a day count equals counting days one by one from 1970-01-01.
    #[test]
    fn civil_dates_match_counting_days(days in -800i64..800) {
        let (mut y, mut m, mut d) = (1970i64, 1u32, 1u32);
        let month_len = |y: i64, m: u32| match m { 2 if is_leap(y) => 29, 2 => 28, 4 | 6 | 9 | 11 => 30, _ => 31 };
        for _ in 0..days.abs() {
            if days > 0 {
                d += 1;
                if d > month_len(y, m) { d = 1; m += 1; if m > 12 { m = 1; y += 1; } }
            } else {
                d -= 1;
                if d == 0 { if m == 1 { m = 12; y -= 1; } else { m -= 1; } d = month_len(y, m); }
            }
        }
        prop_assert_eq!(civil_from_days(days), (y, m, d));
        let t = civil_time(days * 86_400 + 3_723);
        prop_assert_eq!((t.hour, t.minute, t.second), (1, 2, 3));
        // 1970-01-01 was a Thursday; Monday is 0.
        prop_assert_eq!(i64::from(t.weekday), (days + 3).rem_euclid(7));
    }

    /// Python's float repr is a shortest round trip: parsing it gives the same float back.
    #[test]
    fn python_float_repr_round_trips(bits in any::<u64>()) {
        let f = f64::from_bits(bits);
        prop_assume!(f.is_finite());
        let text = python_float_repr(f);
        prop_assert_eq!(text.parse::<f64>().unwrap().to_bits(), f.to_bits(), "{}", text);
        prop_assert!(text.contains('.') || text.contains('e'), "{}", text);
    }

    /// tojson output is JSON that parses to the value serialised, whatever the strings hold.
    #[test]
    fn tojson_is_valid_json_of_the_same_value(
        keys in proptest::collection::vec("\\PC{0,6}", 0..4),
        strings in proptest::collection::vec("[\\x00-\\x7f]{0,4}|\\PC{0,4}", 0..4),
        n in any::<i32>(),
        indent in proptest::option::of(0usize..3),
        ascii in any::<bool>(),
    ) {
        let mut map = serde_json::Map::new();
        for (k, s) in keys.iter().zip(strings.iter().cycle()) {
            map.insert(k.clone(), serde_json::json!([s, n, true, null, 0.5]));
        }
        let value = serde_json::Value::Object(map);
        let style = PyJsonStyle { indent, ensure_ascii: ascii, ..PyJsonStyle::default() };
        let text = dumps(&minijinja::Value::from_serialize(&value), &style).unwrap();
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(back, value);
        if ascii { prop_assert!(text.is_ascii()); }
    }
}

#[test]
fn python_float_repr_examples() {
    // What Python's repr prints for these.
    for (f, py) in [
        (1.0, "1.0"),
        (0.1, "0.1"),
        (1e-5, "1e-05"),
        (0.0001, "0.0001"),
        (1e16, "1e+16"),
        (123456789012345.6, "123456789012345.6"),
        (-2.5e-7, "-2.5e-07"),
        (1.5e300, "1.5e+300"),
        (100.0, "100.0"),
    ] {
        assert_eq!(python_float_repr(f), py, "{f}");
    }
}

#[test]
fn the_byte_alphabet_is_a_bijection_onto_printable_characters() {
    let table = byte_to_char();
    let distinct: std::collections::HashSet<char> = table.iter().copied().collect();
    assert_eq!(distinct.len(), 256);
    assert_eq!(table[b' ' as usize], 'Ġ');
    assert_eq!(table[b'\n' as usize], 'Ċ');
    assert_eq!(table[b'a' as usize], 'a');
    assert!(table.iter().all(|c| !c.is_whitespace() && !c.is_control()));
}
