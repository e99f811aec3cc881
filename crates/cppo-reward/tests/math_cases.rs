//! MATH grading: gold and answer extraction, and equivalence, both positive and negative.

use cppo_core::{Problem, Task};
use cppo_reward::math::{self, How, Source};
use cppo_reward::{MathReward, Reward};

fn assert_equiv(pairs: &[(&str, &str)]) {
    for (a, b) in pairs {
        let v = math::compare(a, b);
        assert!(v.equal, "{a:?} should equal {b:?} ({:?})", v.how);
        assert!(math::compare(b, a).equal, "{b:?} should equal {a:?} (symmetry)");
    }
}

fn assert_differ(pairs: &[(&str, &str)]) {
    for (a, b) in pairs {
        let v = math::compare(a, b);
        assert!(!v.equal, "{a:?} should NOT equal {b:?} ({:?})", v.how);
        assert!(!math::compare(b, a).equal, "{b:?} should NOT equal {a:?} (symmetry)");
    }
}

#[test]
fn gold_is_the_last_box_or_the_whole_reference() {
    assert_eq!(math::gold_answer(r"so $x=\boxed{3}$ and finally $\boxed{\frac{1}{2}}$."), Some(r"\frac{1}{2}"));
    assert_eq!(math::gold_answer(r"nested $\boxed{\left( 3, \frac{\pi}{2} \right)}$"), Some(r"\left( 3, \frac{\pi}{2} \right)"));
    assert_eq!(math::gold_answer(r"our answer is $\boxed 2$."), Some("2"));
    assert_eq!(math::gold_answer(r"$\fbox{7}$"), Some("7"));
    assert_eq!(math::gold_answer(r" \frac{14}{3} "), Some(r"\frac{14}{3}"));
    assert_eq!(math::gold_answer("steps\n#### 72"), Some("72"));
    assert_eq!(math::gold_answer(r"there are $\boxed{}$ primes"), None);
    assert_eq!(math::gold_answer("   "), None);
}

#[test]
fn answer_extraction_order() {
    let e = |s: &str| math::extract_answer(s).map(|(a, src)| (a.to_string(), src));
    assert_eq!(e(r"<answer>5</answer> so \boxed{6}"), Some(("6".into(), Source::Boxed)));
    assert_eq!(e(r"<answer>$\frac12$</answer> the answer is 3"), Some((r"\frac12".into(), Source::AnswerTag)));
    assert_eq!(e(r"<answer>The answer is $7$.</answer>"), Some(("7".into(), Source::AnswerTag)));
    assert_eq!(e(r"<answer> x^2 </answer>"), Some(("x^2".into(), Source::AnswerTag)));
    assert_eq!(e(r"Thus $y=2$, and the answer is $\sqrt{2}$. Also $z$."), Some((r"\sqrt{2}".into(), Source::AnswerPhrase)));
    assert_eq!(e("The final answer is 12 cm.\nDone"), Some(("12 cm".into(), Source::AnswerPhrase)));
    assert_eq!(e(r"we find $a=1$ and then $b = 4$"), Some(("b = 4".into(), Source::InlineMath)));
    assert_eq!(e("no math here"), None);
    assert_eq!(e(r"\boxed{3} truncated \boxed{4"), Some(("3".into(), Source::Boxed)));
}

#[test]
fn fractions_decimals_and_spacing() {
    assert_equiv(&[
        (r"\frac{1}{2}", r"\dfrac{1}{2}"),
        (r"\frac{1}{2}", r"\tfrac12"),
        (r"\frac12", "0.5"),
        ("0.5", "1/2"),
        (r"\frac{1}{2}", ".5"),
        (r"\frac{3}{4}", r"\frac{6}{8}"),
        (r"\left( \frac{1}{2} \right)", r"\frac{1}{2}"),
        (r"1\!000", "1000"),
        (r"10\,000", "10000"),
        (r"135,\!000", "135000"),
        ("1,000", "1000"),
        (r"\frac{-1}{2}", r"-\frac{1}{2}"),
        (r"2\frac{1}{3}", r"\frac{7}{3}"),
        (r"129\frac{1}{3}", r"\frac{388}{3}"),
        ("5.", "5"),
        ("{5}", "5"),
        ("025", "25"),
    ]);
    assert_differ(&[
        (r"\frac{1}{2}", r"\frac{1}{3}"),
        (r"\frac12", "0.51"),
        ("0.333333", r"\frac{1}{3}"), // both exact: a decimal approximation of a rational is not the rational
        ("1000000", "1000001"),
        (r"\frac{2}{3}", r"\frac{3}{2}"),
        ("1/2", "2/1"),
    ]);
}

#[test]
fn roots_pi_and_irrationals() {
    assert_equiv(&[
        (r"\sqrt2", r"\sqrt{2}"),
        (r"10\sqrt{2}", r"10 \sqrt 2"),
        (r"2\sqrt{2}", r"\sqrt{8}"),
        (r"\frac{\sqrt{3}}{2}", r"\frac{1}{2}\sqrt{3}"),
        (r"\frac{1}{\sqrt{2}}", r"\frac{\sqrt{2}}{2}"),
        (r"\sqrt[3]{8}", "2"),
        (r"2\pi", r"\pi \cdot 2"),
        (r"\frac{\pi}{6}", r"\pi/6"),
        (r"\frac{\sqrt{3}}{2}", "0.8660254"), // inexact gold: 1e-6 relative tolerance
        (r"\sqrt{12}", r"2\sqrt{3}"),
        ("e^2", r"e\cdot e"),
    ]);
    assert_differ(&[
        (r"\sqrt{2}", r"\sqrt{3}"),
        (r"2\sqrt{2}", r"\sqrt{6}"),
        (r"\frac{\sqrt{3}}{2}", "0.866"),
        (r"\pi", "3.14"),
        (r"10\sqrt{2}", r"10\sqrt{3}"),
    ]);
}

#[test]
fn units_degrees_percent_dollars_text() {
    assert_equiv(&[
        (r"5\text{ cm}", "5"),
        (r"5 \mbox{ inches}", "5"),
        (r"5\text{ cm}^2", "5"),
        ("12 cm", "12"),
        (r"30^\circ", "30"),
        (r"30^{\circ}", "30"),
        ("30°", "30"),
        (r"45\%", "45"),
        (r"\$18.90", "18.9"),
        (r"\text{Wednesday}", "Wednesday"),
        (r"\textbf{Wednesday}", r"\text{Wednesday}"),
        (r"\text{(A)}", "A"),
        (r"\textbf{(C)}", "(C)"),
        (r"\text{(E)}", r"\mathrm{E}"),
    ]);
    assert_differ(&[
        (r"\text{(A)}", "B"),
        (r"\text{Wednesday}", "Tuesday"),
        (r"\text{May}", r"\text{Yam}"), // words are text, not products of variables
        (r"30^\circ", "31"),
        (r"45\%", "0.46"),
    ]);
}

#[test]
fn equations_and_variables() {
    assert_equiv(&[
        ("x = 5", "5"),
        ("k=3", "3"),
        (r"\theta = \frac{\pi}{2}", r"\frac{\pi}{2}"),
        ("y = -2x", "-2x"),
        ("f(x) = 2x+1", "1+2x"),
        ("x+1", "1+x"),
        ("(x+1)^2", "x^2+2x+1"),
        ("2xy + 10x + 20y + 100", "2(x+10)(y+5)"),
        ("x^2-1", "(x-1)(x+1)"),
        (r"\frac{x}{2}", "0.5x"),
        ("a_1 + a_2", "a_2 + a_1"),
        ("x+y=5", "y+x=5"),
        ("x+y=5", "5=x+y"),
        (r"\sin^2 x + \cos^2 x", r"\cos^2x+\sin^2x"),
        (r"\sin(2x)", r"2\sin x\cos x"),
        ("3x(3x+1)", "9x^2+3x"),
    ]);
    assert_differ(&[
        ("x+1", "x+2"),
        ("x^2", "2x"),
        ("x", "y"),
        ("x^3", "x"),
        ("x = 5", "6"),
        ("x+y=5", "x+y=6"),
        ("(x+1)^2", "x^2+1"),
        ("2x", "2"),
        // Both sides must have the same variables, even where one is constant.
        (r"\sin^2 x + \cos^2 x", "1"),
    ]);
}

#[test]
fn tuples_intervals_and_brackets() {
    assert_equiv(&[
        ("(1,2)", r"\left( 1, 2 \right)"),
        (r"\left( 3, \frac{\pi}{2} \right)", r"(3, \frac{\pi}{2})"),
        (r"\left( 3, \frac{\pi}{2} \right)", r"(3, \pi/2)"),
        (r"[0, \infty)", r"[0,\infty)"),
        (r"[0, \infty)", r"\left[ 0, +\infty \right)"),
        (r"(-\infty, 1) \cup (2, \infty)", r"(2,\infty)\cup(-\infty,1)"),
        (r"(\frac{3}{4}, \infty)", r"(0.75, \infty)"),
        (r"\mathbb{R}", r"(-\infty,\infty)"),
        ("(1,-2,8)", "(1, -2, 8)"),
        (r"x \in [-2,7]", "[-2,7]"),
    ]);
    assert_differ(&[
        ("(1,2)", "[1,2]"),
        ("(1,2)", "(1,2]"),
        ("[0,1)", "[0,1]"),
        ("(1,2)", "(2,1)"),
        ("(1,2)", "(1,2,3)"),
        ("(1,2)", "1,2"),
        (r"[0,\infty)", r"(0,\infty)"),
        (r"(-\infty,1)\cup(2,\infty)", r"(-\infty,1)\cup[2,\infty)"),
    ]);
}

#[test]
fn unordered_lists_and_sets() {
    assert_equiv(&[
        ("1, 2", "2, 1"),
        ("1,2,3", "3, 1, 2"),
        (r"\{1, 2\}", "2, 1"),
        (r"\{1,2\}", r"\left\{ 2, 1 \right\}"),
        (r"-2 \text{ or } -12", "-12, -2"),
        (r"2, 3, \text{ and } 4", "4,3,2"),
        (r"1 \pm \sqrt{19}", r"1+\sqrt{19}, 1-\sqrt{19}"),
        (r"\{1\pm\sqrt{5},-2\}", r"-2, 1-\sqrt{5}, 1+\sqrt{5}"),
        ("x = 1, x = 2", "2, 1"),
        ("a=1, b=2", "b = 2, a = 1"),
        (r"\frac{1}{2}, 3", r"3, 0.5"),
        (r"\emptyset", r"\{\}"),
        (r"\frac 74,7", r"7, \frac{7}{4}"),
    ]);
    assert_differ(&[
        ("1, 2", "1, 3"),
        ("1, 2", "1, 2, 3"),
        ("1, 1, 2", "1, 2, 2"),
        ("a=1, b=2", "a=2, b=1"),
        ("a=1, b=2", "1, 2"),
        (r"\{1,2\}", r"(1,2)"),
    ]);
}

#[test]
fn matrices() {
    assert_equiv(&[
        (r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}", r"\begin{bmatrix}1&2\\3&4\end{bmatrix}"),
        (r"\begin{pmatrix} \frac{1}{2} & 0 \\ 0 & 1 \end{pmatrix}", r"\begin{pmatrix} 0.5 & 0 \\ 0 & 1 \end{pmatrix}"),
        (r"\begin{pmatrix} -1/2 & -\sqrt{3}/2 \end{pmatrix}", r"\begin{pmatrix} -\frac12 & -\frac{\sqrt3}{2} \end{pmatrix}"),
        (r"\begin{pmatrix} 4 \\ -10 \end{pmatrix}", r"\begin{array}{c} 4 \\ -10 \end{array}"),
    ]);
    assert_differ(&[
        (r"\begin{pmatrix} 1 & 2 \\ 3 & 4 \end{pmatrix}", r"\begin{pmatrix} 1 & 3 \\ 2 & 4 \end{pmatrix}"),
        (r"\begin{pmatrix} 1 & 2 \end{pmatrix}", r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}"),
        (r"\begin{pmatrix} 1 & 2 \end{pmatrix}", "(1,2)"),
    ]);
}

#[test]
fn other_text_answers_compare_as_text() {
    assert_equiv(&[("20412_5", "20412_{5}"), ("3:1", "3 : 1"), (r"8\!:\!34 \text{ p.m.}", "8:34"), (r"\infty", r"+\infty")]);
    assert_differ(&[("20412_5", "20412_6"), ("3:1", "1:3"), (r"\infty", r"-\infty"), ("", "0")]);
}

#[test]
fn verdicts_say_how() {
    assert_eq!(math::compare(r"\dfrac12", r"\frac{1}{2}").how, How::Identical);
    assert_eq!(math::compare("1,2", "2,1").how, How::Structural);
    assert_eq!(math::compare("0.5", r"\frac12").how, How::Numeric);
    assert_eq!(math::compare("1", "2").how, How::Different);
    assert_eq!(math::compare("{", "{").how, How::Malformed);
    assert!(math::compare("{", "{").equal);
    assert!(!math::compare("{1", "1").equal);
}

#[test]
fn grading_and_the_reward() {
    let reference = r"Hence the answer is $\boxed{\frac{\sqrt{3}}{2}}$.";
    let s = math::grade(r"<think>...</think>\n<answer>$\frac{1}{2}\sqrt3$</answer>", reference);
    assert_eq!((s.value, s.correct), (1.0, Some(true)), "{}", s.reason);
    assert_eq!(s.extracted.as_deref(), Some(r"\frac{1}{2}\sqrt{3}"));
    let s = math::grade(r"so \boxed{\frac{\sqrt{2}}{2}}", reference);
    assert_eq!((s.value, s.correct), (0.0, Some(false)), "{}", s.reason);
    assert!(s.reason.contains("wrong"), "{}", s.reason);
    let s = math::grade("I do not know", reference);
    assert_eq!((s.extracted, s.correct), (None, Some(false)));
    let p = Problem { id: "m".into(), prompt: "q".into(), answer: r"\left( 3, \frac{\pi}{2} \right)".into(), task: Task::Math, record: serde_json::Value::Null, messages: None, prompt_field: None };
    assert_eq!(MathReward.name(), "math");
    assert_eq!(MathReward.score(r"\boxed{(3, \frac{\pi}{2})}", &p).value, 1.0);
    assert_eq!(MathReward.score(r"\boxed{[3, \frac{\pi}{2}]}", &p).value, 0.0);
}

#[test]
fn typical_model_outputs() {
    let cases: &[(&str, &str, bool)] = &[
        ("Therefore, the final answer is: $\\boxed{\\frac{3}{4}}$. I hope it is correct.", "\\frac34", true),
        ("**Final Answer**\n\n\\[ \\boxed{12} \\]", "12", true),
        ("so the angle is $\\boxed{12^\\circ}$", "12", true),
        ("\\boxed{x=2}", "2", true),
        ("\\boxed{\\$12.50}", "12.50", true),
        ("\\boxed{12,345}", "12,\\!345", true),
        ("\\boxed{1, 2, 3}", "3,2,1", true),
        ("\\boxed{\\text{C}}", "\\text{(C)}", true),
        ("\\boxed{(D)}", "\\text{(C)}", false),
        ("\\boxed{\\frac{1}{\\sqrt{3}}}", "\\frac{\\sqrt{3}}{3}", true),
        ("\\boxed{\\sqrt{27}}", "3\\sqrt{3}", true),
        ("\\boxed{(x+1)^{2}}", "x^2+2x+1", true),
        ("\\boxed{2.25}", "\\dfrac{9}{4}", true),
        ("\\boxed{562949953421312}", "2^{49}", true),
        ("\\boxed{562949953421313}", "2^{49}", false),
        ("\\boxed{-562949953421312}", "-2^{49}", true),
        ("\\boxed{6}", "6\\%", true),
        ("\\boxed{0.06}", "6\\%", false),
        ("\\boxed{2 dollars}", "\\$2", true),
        ("The answer is 18 apples.", "18", true),
        ("<answer>The answer is 18 apples.</answer>", "18", true),
        ("<answer>x = 2 or x = 3</answer>", "2, 3", true),
        ("<answer>x = 2 or x = 4</answer>", "2, 3", false),
        ("\\boxed{1+274i}", "274i + 1", true),
        ("\\boxed{\\frac{1}{2} + \\frac{\\sqrt{3}}{2}i}", "\\frac{1+i\\sqrt{3}}{2}", true),
        ("\\boxed{(-\\infty, -1) \\cup (4, \\infty)}", "(-\\infty, -1) \\cup (4, \\infty)", true),
        ("\\boxed{(4, \\infty) \\cup (-\\infty, -1)}", "(-\\infty, -1) \\cup (4, \\infty)", true),
        ("\\boxed{(-\\infty, -1] \\cup (4, \\infty)}", "(-\\infty, -1) \\cup (4, \\infty)", false),
    ];
    for (completion, gold, expected) in cases {
        let s = math::grade(completion, gold);
        assert_eq!(s.correct, Some(*expected), "{completion:?} vs {gold:?}: {}", s.reason);
    }
}
