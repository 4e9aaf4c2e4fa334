package testmodel

// Corpus is the built-in training text of the test tokenizer: short
// original passages in several scripts, plus code, numbers and chat markup,
// so the learned merges cover what tokenizer tests exercise.
const Corpus = `The quick brown fox jumps over the lazy dog. The dog did not mind; it was asleep in the sun.
A small model is easy to test, and a test that runs in a second is a test that people run.
We're testing the tokenizer: it's fine, they'll see, you've done it, I'm sure, we'd agree.
Inference engines read weights, run the forward pass, and sample the next token again and again.
Numbers: 0 1 2 3 4 5 6 7 8 9, 10, 42, 123456, 3.14159, 2026-12-01, 1e-6, 0x7f80.
Der schnelle braune Fuchs springt über den faulen Hund. Größe, Straße, Mädchen, schön.
Le renard brun rapide saute par-dessus le chien paresseux. Où est la café? À bientôt, élève!
El rápido zorro marrón salta sobre el perro perezoso. ¿Dónde está la niña? ¡Mañana sí!
Быстрая коричневая лиса прыгает через ленивую собаку. Привет, мир! Как дела?
敏捷的棕色狐狸跳过了懒狗。今天天气很好，我们去公园散步吧。模型推理需要快速的内存。
素早い茶色の狐がのろまな犬を飛び越える。こんにちは、世界！テストは大切です。
빠른 갈색 여우가 게으른 개를 뛰어넘는다. 안녕하세요, 세계!
तेज़ भूरी लोमड़ी आलसी कुत्ते के ऊपर कूदती है। नमस्ते दुनिया!
الثعلب البني السريع يقفز فوق الكلب الكسول. مرحبا بالعالم!
Γρήγορη καφέ αλεπού πηδά πάνω από τον τεμπέλη σκύλο. Καλημέρα κόσμε!
Emoji too: 🙂 🚀 ✨ — and symbols like © ® ™ € £ ¥ ± × ÷ ≤ ≥ ≠ ∞ → ←.
func main() {
	for i := 0; i < 10; i++ {
		fmt.Println("hello, world", i)
	}
}
def forward(self, x):
    return self.down(silu(self.gate(x)) * self.up(x))
<|im_start|>user
What is the capital of France?<|im_end|>
<|im_start|>assistant
<think>
The user asks a simple question.
</think>

The capital of France is Paris.<|im_end|>
The the the and and of of to to in in is is it it that that for for on on with with as as.
Tokens, tokenizer, tokenization, token ids, merges, vocabulary, byte-level, pre-tokenizer.
`
