package chat

// Qwen3Source is the built-in template written as Jinja, for tools that put
// a chat template into the GGUF files they make (so other runtimes, like
// llama.cpp, render the same prompt as Template.Render). It is Qwen3's
// ChatML without tool calls; unlike Qwen3's own template, thinking is off
// unless enable_thinking is passed as true, the default Bonsai expects.
const Qwen3Source = `{%- set ns = namespace(last_user=-1) -%}
{%- for m in messages -%}
  {%- if m.role == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}
{%- endfor -%}
{%- for m in messages -%}
  {%- if m.role == 'assistant' -%}
    {%- set content = m.content -%}
    {%- set reasoning = m.reasoning_content if m.reasoning_content is defined and m.reasoning_content else '' -%}
    {%- if '</think>' in content -%}
      {%- if not reasoning -%}{%- set reasoning = content.split('</think>')[0].split('<think>')[-1] -%}{%- endif -%}
      {%- set content = content.split('</think>')[-1] -%}
    {%- endif -%}
    {%- set content = content.lstrip('\n') -%}
    {%- if loop.index0 > ns.last_user and (loop.last or reasoning) -%}
      {{- '<|im_start|>assistant\n<think>\n' + reasoning.strip('\n') + '\n</think>\n\n' + content + '<|im_end|>\n' -}}
    {%- else -%}
      {{- '<|im_start|>assistant\n' + content + '<|im_end|>\n' -}}
    {%- endif -%}
  {%- else -%}
    {{- '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' -}}
  {%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
  {{- '<|im_start|>assistant\n' -}}
  {%- if not (enable_thinking is defined and enable_thinking) -%}{{- '<think>\n\n</think>\n\n' -}}{%- endif -%}
{%- endif -%}
`
